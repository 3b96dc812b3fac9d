#include "quantile_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "tensormorph/contract_math.h"

namespace tmorph::cpu {

namespace {

template <class T>
std::vector<T> finite_values(const uint8_t* p, uint64_t n, uint64_t stride) {
  std::vector<T> v;
  v.reserve(n / stride + 1);
  for (uint64_t i = 0; i < n; i += stride) {
    T x;
    std::memcpy(&x, p + i * sizeof(T), sizeof(T));
    if constexpr (!std::numeric_limits<T>::is_integer) {
      if (!std::isfinite(x)) continue;
    }
    v.push_back(x);
  }
  return v;
}

// Places the order statistics ranks[0..m) (sorted, unique) at their sorted positions in v[lo, hi):
// the middle rank splits the range, each half takes its own ranks (about n log2 m work in all).
template <class T>
void multi_select(std::vector<T>& v, uint64_t lo, uint64_t hi, const uint64_t* ranks, size_t m) {
  if (m == 0 || lo >= hi) return;
  const size_t mid = m / 2;
  const auto at = [&](uint64_t i) { return v.begin() + static_cast<std::ptrdiff_t>(i); };
  std::nth_element(at(lo), at(ranks[mid]), at(hi));
  multi_select(v, lo, ranks[mid], ranks, mid);
  multi_select(v, ranks[mid] + 1, hi, ranks + mid + 1, m - mid - 1);
}

template <class T>
void select(std::vector<T>& v, const tm_quantiles_params_v1& params, tm_quantile_value_v1* out) {
  const uint64_t n = v.size();
  if (n == 0) {
    for (uint32_t q = 0; q < params.count; ++q) out[q] = {std::nan(""), std::nan(""), std::nan(""), 0};
    return;
  }
  const std::vector<uint64_t> ranks = ranks_read(params.probabilities, params.count, n);
  multi_select(v, 0, n, ranks.data(), ranks.size());
  for (uint32_t q = 0; q < params.count; ++q) {
    const double value = quantile_of(params.probabilities[q], n, [&](uint64_t r) { return static_cast<double>(v[r]); });
    out[q] = {value, value, value, n};
  }
}

template <class T>
void sample_typed(const uint8_t* p, uint64_t n, uint64_t stride, const tm_quantiles_params_v1& params,
                  tm_quantile_value_v1* out) {
  auto v = finite_values<T>(p, n, stride);
  select(v, params, out);
}

}  // namespace

void quantiles_by_selection(DType dtype, const void* data, uint64_t count, uint64_t stride,
                            const tm_quantiles_params_v1& params, tm_quantile_value_v1* out) {
  const auto* p = static_cast<const uint8_t*>(data);
  switch (dtype) {
    case DType::F64: return sample_typed<double>(p, count, stride, params, out);
    case DType::F32: return sample_typed<float>(p, count, stride, params, out);
    case DType::I32: return sample_typed<int32_t>(p, count, stride, params, out);
    case DType::U32: return sample_typed<uint32_t>(p, count, stride, params, out);
    case DType::I64: return sample_typed<int64_t>(p, count, stride, params, out);
    case DType::U64: return sample_typed<uint64_t>(p, count, stride, params, out);
    default: return;
  }
}

namespace {

// Sketch helpers over IEEE floats of `Bits` width: the top 16 bits of a value name its bucket.
template <class F, class U>
struct TopBits {
  static constexpr int kShift = 8 * sizeof(U) - 16;
  static F value(U bits) {
    F f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  // Order-preserving rank of a 16-bit prefix: negatives reversed below positives.
  static uint32_t order(uint32_t prefix) { return (prefix & 0x8000) ? 0x7FFF - (prefix & 0x7FFF) : 0x8000 + prefix; }
  static uint32_t prefix_of_order(uint32_t o) { return o >= 0x8000 ? o - 0x8000 : 0x8000 | (0x7FFF - o); }
  // Inclusive value range of all finite numbers with this prefix.
  static void bounds(uint32_t prefix, double* lo, double* hi) {
    const U base = static_cast<U>(prefix) << kShift;
    const U low_mask = (static_cast<U>(1) << kShift) - 1;
    const double a = value(base), b = value(base | low_mask);
    *lo = std::min(a, b), *hi = std::max(a, b);
  }
};

template <class F, class U>
void sketch_typed(const uint8_t* p, uint64_t n, const tm_quantiles_params_v1& params, tm_quantile_value_v1* out) {
  using TB = TopBits<F, U>;
  std::vector<uint64_t> by_order(65536, 0);
  uint64_t finite = 0;
  for (uint64_t i = 0; i < n; ++i) {
    F x;
    std::memcpy(&x, p + i * sizeof(F), sizeof(F));
    if (!std::isfinite(x)) continue;
    U bits;
    std::memcpy(&bits, &x, sizeof bits);
    ++by_order[TB::order(static_cast<uint32_t>(bits >> TB::kShift))];
    ++finite;
  }
  // Bucket holding the element of rank r (0-based) in sorted order.
  auto bucket_of_rank = [&](uint64_t r) {
    uint64_t seen = 0;
    for (uint32_t o = 0; o < 65536; ++o) {
      seen += by_order[o];
      if (seen > r) return TB::prefix_of_order(o);
    }
    return TB::prefix_of_order(65535);
  };
  for (uint32_t q = 0; q < params.count; ++q) {
    if (finite == 0) {
      out[q] = {std::nan(""), std::nan(""), std::nan(""), 0};
      continue;
    }
    // The lerp is monotone in both order statistics, so the buckets' bounds bound the quantile.
    const double lo = quantile_of(params.probabilities[q], finite, [&](uint64_t r) {
      double l, h;
      TB::bounds(bucket_of_rank(r), &l, &h);
      return l;
    });
    const double hi = quantile_of(params.probabilities[q], finite, [&](uint64_t r) {
      double l, h;
      TB::bounds(bucket_of_rank(r), &l, &h);
      return h;
    });
    out[q] = {lo + (hi - lo) / 2, lo, hi, finite};
  }
}

}  // namespace

void quantiles_bitpattern_sketch(DType dtype, const void* data, uint64_t count,
                                 const tm_quantiles_params_v1& params, tm_quantile_value_v1* out) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (dtype == DType::F32) sketch_typed<float, uint32_t>(p, count, params, out);
  if (dtype == DType::F64) sketch_typed<double, uint64_t>(p, count, params, out);
}

void quantiles_sampling(DType dtype, const void* data, uint64_t count, const tm_quantiles_params_v1& params,
                        tm_quantile_value_v1* out) {
  const uint64_t budget_elements =
      std::max<uint64_t>(1, (params.memory_budget_bytes ? params.memory_budget_bytes : UINT64_MAX) / dtype_size(dtype));
  const uint64_t stride = std::max<uint64_t>(1, (count + budget_elements - 1) / budget_elements);
  quantiles_by_selection(dtype, data, count, stride, params, out);
}

}  // namespace tmorph::cpu
