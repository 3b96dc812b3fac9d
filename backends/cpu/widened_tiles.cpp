#include "widened_tiles.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace tmorph::cpu {

namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// float64 value of every 16-bit (F16) or 8-bit pattern, built once.
const std::vector<double>& f16_table() {
  static const std::vector<double> table = [] {
    std::vector<double> t(65536);
    for (uint32_t b = 0; b < 65536; ++b) t[b] = f16_to_double(static_cast<uint16_t>(b));
    return t;
  }();
  return table;
}

const std::vector<double>& f8_table(DType t) {
  static const auto make = [](double (*f)(uint8_t)) {
    std::vector<double> v(256);
    for (uint32_t b = 0; b < 256; ++b) v[b] = f(static_cast<uint8_t>(b));
    return v;
  };
  static const std::vector<double> e4m3 = make(f8_e4m3fn_to_double), e5m2 = make(f8_e5m2_to_double);
  return t == DType::F8_E4M3FN ? e4m3 : e5m2;
}

template <typename T>
void widen(const uint8_t* src, uint64_t n, double* dst) {
  for (uint64_t i = 0; i < n; ++i) dst[i] = static_cast<double>(load<T>(src + i * sizeof(T)));
}

template <typename U>
void float_buckets(const uint8_t* src, uint64_t n, uint8_t* dst) {
  constexpr unsigned bits = sizeof(U) * 8;
  constexpr U sign = U(1) << (bits - 1);
  for (uint64_t i = 0; i < n; ++i) {
    const U b = load<U>(src + i * sizeof(U));
    const U key = (b & sign) ? U(~b) : U(b | sign);
    dst[i] = static_cast<uint8_t>(key >> (bits - 8));
  }
}

template <typename U>
void int_buckets(const uint8_t* src, uint64_t n, bool is_signed, uint8_t* dst) {
  constexpr unsigned bits = sizeof(U) * 8;
  const U flip = is_signed ? U(U(1) << (bits - 1)) : U(0);
  for (uint64_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(U(load<U>(src + i * sizeof(U)) ^ flip) >> (bits - 8));
}

// The statistics of one row segment (what lod's stats_of computed): one pass in 8 independent lanes, the
// lanes combined in a fixed order; m2 about a shift c (the first value when finite, else 0):
// m2 = sum (x - c)^2 - (sum (x - c))^2 / finite.
tm_tile_stats_v1 segment_stats(const double* values, uint64_t n) {
  constexpr int kLanes = 8;
  constexpr double inf = std::numeric_limits<double>::infinity();
  tm_tile_stats_v1 t{};
  t.min = inf, t.max = -inf;
  t.count = n;
  if (n == 0) return t;
  const double c = std::isfinite(values[0]) ? values[0] : 0.0;
  // Counts are kept as float64 lanes (exact below 2^53) so that every lane operation is a select on
  // float64 that the compiler turns into vector code.
  double sum[kLanes] = {}, sq[kLanes] = {}, mn[kLanes], mx[kLanes], am[kLanes] = {};
  double fin[kLanes] = {}, nan[kLanes] = {}, zero[kLanes] = {};
  for (int l = 0; l < kLanes; ++l) mn[l] = inf, mx[l] = -inf;
  const auto step = [&](int l, double x) {
    const bool f = (x - x) == 0.0;  // false for NaN and +-Inf
    const double d = f ? x - c : 0.0;
    const double lo = f ? x : inf, hi = f ? x : -inf, a = f ? std::fabs(x) : 0.0;
    sum[l] += d;
    sq[l] += d * d;
    mn[l] = lo < mn[l] ? lo : mn[l];
    mx[l] = hi > mx[l] ? hi : mx[l];
    am[l] = a > am[l] ? a : am[l];
    fin[l] += f ? 1.0 : 0.0;
    nan[l] += x != x ? 1.0 : 0.0;
    zero[l] += x == 0.0 ? 1.0 : 0.0;
  };
  uint64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) step(l, values[i + l]);
  for (int l = 0; i < n; ++i, ++l) step(l, values[i]);
  double s = 0, q = 0, finite_lanes = 0, nan_lanes = 0, zero_lanes = 0;
  for (int l = 0; l < kLanes; ++l) {
    s += sum[l], q += sq[l];
    t.min = std::min(t.min, mn[l]), t.max = std::max(t.max, mx[l]), t.abs_max = std::max(t.abs_max, am[l]);
    finite_lanes += fin[l], nan_lanes += nan[l], zero_lanes += zero[l];
  }
  const uint64_t finite = static_cast<uint64_t>(finite_lanes);
  t.nan_count = static_cast<uint64_t>(nan_lanes);
  t.zero_count = static_cast<uint64_t>(zero_lanes);
  t.inf_count = n - finite - t.nan_count;
  if (finite) {
    t.sum = s + c * static_cast<double>(finite);
    t.m2 = std::max(0.0, q - s * s / static_cast<double>(finite));
  }
  return t;
}

// Adds b into a: lod/tile_stats.cpp's merge_into without the histogram, to the letter.
void merge(tm_tile_stats_v1& a, const tm_tile_stats_v1& b) {
  const double na = static_cast<double>(a.count - a.nan_count - a.inf_count);
  const double nb = static_cast<double>(b.count - b.nan_count - b.inf_count);
  if (nb > 0) {
    if (na == 0) {
      a.m2 = b.m2;
    } else {
      const double delta = b.sum / nb - a.sum / na;
      a.m2 = a.m2 + b.m2 + delta * delta * (na * nb / (na + nb));
    }
    a.sum += b.sum;
    a.min = std::min(a.min, b.min);
    a.max = std::max(a.max, b.max);
    a.abs_max = std::max(a.abs_max, b.abs_max);
  }
  a.count += b.count;
  a.nan_count += b.nan_count;
  a.inf_count += b.inf_count;
  a.zero_count += b.zero_count;
}

}  // namespace

void order_buckets(DType t, const uint8_t* src, uint64_t n, uint8_t* dst) {
  switch (t) {
    case DType::F64: return float_buckets<uint64_t>(src, n, dst);
    case DType::F32: return float_buckets<uint32_t>(src, n, dst);
    case DType::F16:
    case DType::BF16: return float_buckets<uint16_t>(src, n, dst);
    case DType::F8_E4M3FN:
    case DType::F8_E5M2: return float_buckets<uint8_t>(src, n, dst);
    case DType::I8: return int_buckets<uint8_t>(src, n, true, dst);
    case DType::I16: return int_buckets<uint16_t>(src, n, true, dst);
    case DType::I32: return int_buckets<uint32_t>(src, n, true, dst);
    case DType::I64: return int_buckets<uint64_t>(src, n, true, dst);
    case DType::U8:
    case DType::BOOL: return int_buckets<uint8_t>(src, n, false, dst);
    case DType::U16: return int_buckets<uint16_t>(src, n, false, dst);
    case DType::U32: return int_buckets<uint32_t>(src, n, false, dst);
    case DType::U64: return int_buckets<uint64_t>(src, n, false, dst);
  }
}

void widen_to_double(DType t, const uint8_t* src, uint64_t n, double* dst) {
  switch (t) {
    case DType::F64: return widen<double>(src, n, dst);
    case DType::F32: return widen<float>(src, n, dst);
    case DType::F16: {
      const double* table = f16_table().data();
      for (uint64_t i = 0; i < n; ++i) dst[i] = table[load<uint16_t>(src + 2 * i)];
      return;
    }
    case DType::BF16:
      for (uint64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(uint32_t{load<uint16_t>(src + 2 * i)} << 16);
      return;
    case DType::F8_E4M3FN:
    case DType::F8_E5M2: {
      const double* table = f8_table(t).data();
      for (uint64_t i = 0; i < n; ++i) dst[i] = table[src[i]];
      return;
    }
    case DType::I8: return widen<int8_t>(src, n, dst);
    case DType::I16: return widen<int16_t>(src, n, dst);
    case DType::I32: return widen<int32_t>(src, n, dst);
    case DType::I64: return widen<int64_t>(src, n, dst);
    case DType::U8: return widen<uint8_t>(src, n, dst);
    case DType::U16: return widen<uint16_t>(src, n, dst);
    case DType::U32: return widen<uint32_t>(src, n, dst);
    case DType::U64: return widen<uint64_t>(src, n, dst);
    case DType::BOOL:
      for (uint64_t i = 0; i < n; ++i) dst[i] = src[i] ? 1.0 : 0.0;
      return;
  }
}

void widened_tile(DType dtype, const uint8_t* first, uint64_t stride, uint64_t rows, uint64_t cols, double* values,
                  uint8_t* keys, tm_tile_stats_v1& t) {
  t = tm_tile_stats_v1{};
  t.min = std::numeric_limits<double>::infinity(), t.max = -std::numeric_limits<double>::infinity();
  for (uint64_t r = 0; r < rows; ++r) {
    const uint8_t* row = first + r * stride;
    widen_to_double(dtype, row, cols, values);
    merge(t, segment_stats(values, cols));
    order_buckets(dtype, row, cols, keys);
    for (uint64_t i = 0; i < cols; ++i) t.buckets[keys[i]] += (values[i] - values[i]) == 0.0;
  }
}

}  // namespace tmorph::cpu
