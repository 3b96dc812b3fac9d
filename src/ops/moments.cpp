#include "ops/moments.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace tmorph {

namespace {

// Knuth's TwoSum: s + e == a + b exactly.
void two_sum(double a, double b, double* s, double* e) {
  *s = a + b;
  const double bp = *s - a;
  *e = (a - (*s - bp)) + (b - bp);
}

std::string int128_to_string(__int128 v) {
  if (v == 0) return "0";
  const bool negative = v < 0;
  unsigned __int128 u = negative ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string digits;
  while (u) digits.push_back(static_cast<char>('0' + static_cast<int>(u % 10))), u /= 10;
  if (negative) digits.push_back('-');
  std::reverse(digits.begin(), digits.end());
  return digits;
}

__int128 int_sum_of(const tm_moments_partial_v1& p) {
  const unsigned __int128 u = (static_cast<unsigned __int128>(static_cast<uint64_t>(p.int_sum_hi)) << 64) | p.int_sum_lo;
  return static_cast<__int128>(u);
}

}  // namespace

tm_moments_partial_v1 merge_moments(const tm_moments_partial_v1& a, const tm_moments_partial_v1& b) {
  tm_moments_partial_v1 r{};
  r.count = a.count + b.count;
  r.finite_count = a.finite_count + b.finite_count;
  r.nan_count = a.nan_count + b.nan_count;
  r.inf_count = a.inf_count + b.inf_count;
  r.zero_count = a.zero_count + b.zero_count;
  r.min = std::min(a.min, b.min);
  r.max = std::max(a.max, b.max);
  r.abs_max = std::max(a.abs_max, b.abs_max);
  double e;
  two_sum(a.sum, b.sum, &r.sum, &e);
  r.sum_err = a.sum_err + b.sum_err + e;
  if (a.finite_count == 0) {
    r.mean = b.mean, r.m2 = b.m2;
  } else if (b.finite_count == 0) {
    r.mean = a.mean, r.m2 = a.m2;
  } else {
    const double na = static_cast<double>(a.finite_count), nb = static_cast<double>(b.finite_count);
    const double n = na + nb;
    const double d = b.mean - a.mean;
    r.mean = a.mean + d * (nb / n);
    r.m2 = a.m2 + b.m2 + d * d * (na * nb / n);
  }
  r.int_min = std::min(a.int_min, b.int_min);
  r.int_max = std::max(a.int_max, b.int_max);
  r.uint_min = std::min(a.uint_min, b.uint_min);
  r.uint_max = std::max(a.uint_max, b.uint_max);
  const __int128 s = int_sum_of(a) + int_sum_of(b);
  r.int_sum_lo = static_cast<uint64_t>(static_cast<unsigned __int128>(s));
  r.int_sum_hi = static_cast<int64_t>(static_cast<unsigned __int128>(s) >> 64);
  return r;
}

void MomentsReducer::push(const tm_moments_partial_v1& block) {
  tm_moments_partial_v1 node = block;
  uint64_t index = pushed_;
  int level = 0;
  // Each set low bit of the index means a left sibling of equal size is waiting.
  while (index & 1) {
    node = merge_moments(stack_[level], node);
    index >>= 1;
    ++level;
  }
  if (stack_.size() <= static_cast<size_t>(level)) stack_.resize(level + 1);
  stack_[level] = node;
  ++pushed_;
}

tm_moments_partial_v1 MomentsReducer::finish() const {
  tm_moments_partial_v1 acc = empty_moments();
  bool have = false;
  for (size_t level = 0; level < stack_.size(); ++level) {
    if (!((pushed_ >> level) & 1)) continue;
    acc = have ? merge_moments(stack_[level], acc) : stack_[level];
    have = true;
  }
  return acc;
}

Moments finalize_moments(const tm_moments_partial_v1& p, DType dtype) {
  Moments m;
  m.count = p.count;
  m.finite_count = p.finite_count;
  m.nan_count = p.nan_count;
  m.inf_count = p.inf_count;
  m.zero_count = p.zero_count;
  m.is_integer = !dtype_is_float(dtype);
  if (p.finite_count == 0) return m;  // everything else stays 0: there is nothing to describe
  const double n = static_cast<double>(p.finite_count);
  m.min = p.min;
  m.max = p.max;
  m.abs_max = p.abs_max;
  m.m2 = p.m2;
  m.std = std::sqrt(std::max(0.0, p.m2) / n);
  if (m.is_integer) {
    const __int128 s = int_sum_of(p);
    m.int_sum = int128_to_string(s);
    m.sum = static_cast<double>(static_cast<long double>(s));
    m.mean = static_cast<double>(static_cast<long double>(s) / static_cast<long double>(p.finite_count));
    if (dtype_is_signed_int(dtype)) {
      m.int_min = std::to_string(p.int_min), m.int_max = std::to_string(p.int_max);
    } else {
      m.int_min = std::to_string(p.uint_min), m.int_max = std::to_string(p.uint_max);
    }
  } else {
    m.sum = p.sum + p.sum_err;
    m.mean = m.sum / n;
  }
  return m;
}

MomentsSummary summarize_moments(const Moments& m) {
  MomentsSummary s;
  s.count = m.count, s.finite_count = m.finite_count, s.nan_count = m.nan_count, s.inf_count = m.inf_count;
  s.zero_count = m.zero_count, s.min = m.min, s.max = m.max, s.abs_max = m.abs_max, s.sum = m.sum;
  s.mean = m.mean, s.std = m.std, s.is_integer = m.is_integer;
  s.int_min = m.int_min, s.int_max = m.int_max, s.int_sum = m.int_sum;
  return s;
}

}  // namespace tmorph
