#include "quant_moments_kernel.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant_moments_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "core/thread_pool.h"
#include "dequant/ggml_dequant.h"
#include "tensormorph/op_contracts.h"

// What one block's codes sum to: the integer facts the moments are built from.
#ifndef TM_QUANT_MOMENTS_CODE_SUMS
#define TM_QUANT_MOMENTS_CODE_SUMS
namespace tmorph::cpu::quant_moments_detail {
struct CodeSums {
  int32_t sum;     // sum of the codes
  int32_t sum_sq;  // sum of their squares
  int32_t zeros;   // codes equal to 0
};
constexpr uint32_t kQ4_0 = 2, kQ8_0 = 8;  // ggml type ids
constexpr uint32_t kBlockElements = 32;
inline uint32_t block_bytes(uint32_t type) { return type == kQ8_0 ? 34 : 18; }
}  // namespace tmorph::cpu::quant_moments_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu::quant_moments_detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_SCALAR
// The code sums of 32 int8 codes, one at a time (targets without 128-bit vectors).
CodeSums scalar_sums(const int8_t* q) {
  CodeSums s{0, 0, 0};
  for (uint32_t i = 0; i < kBlockElements; ++i) s.sum += q[i], s.sum_sq += q[i] * q[i], s.zeros += q[i] == 0;
  return s;
}

void BlockCodeSums(uint32_t type, const uint8_t* src, uint64_t blocks, CodeSums* out) {
  int8_t q[kBlockElements];
  for (uint64_t i = 0; i < blocks; ++i) {
    if (type == kQ8_0) {
      std::memcpy(q, src + i * 34 + 2, 32);
    } else {
      const uint8_t* p = src + i * 18 + 2;
      for (int j = 0; j < 16; ++j) q[j] = static_cast<int8_t>((p[j] & 0x0f) - 8), q[j + 16] = static_cast<int8_t>((p[j] >> 4) - 8);
    }
    out[i] = scalar_sums(q);
  }
}
#else
// The code sums of 32 int8 codes held in two 16-lane vectors.
template <class V8>
HWY_INLINE CodeSums sums_of(V8 a, V8 b) {
  const hn::FixedTag<int8_t, 16> d8;
  const hn::FixedTag<uint8_t, 16> du8;
  const hn::FixedTag<int16_t, 8> d16;
  const hn::FixedTag<int32_t, 4> d32;
  const hn::FixedTag<uint64_t, 2> du64;
  const hn::Half<decltype(d8)> h8;
  // Sum: the codes biased to q + 128 (0..255) summed eight at a time.
  const auto bias = hn::Set(du8, 0x80);
  const auto biased = hn::Add(hn::SumsOf8(hn::Xor(hn::BitCast(du8, a), bias)), hn::SumsOf8(hn::Xor(hn::BitCast(du8, b), bias)));
  // Squares: pairs of promoted codes multiplied and added into 32-bit lanes (pmaddwd on x86).
  const auto a0 = hn::PromoteTo(d16, hn::LowerHalf(h8, a)), a1 = hn::PromoteTo(d16, hn::UpperHalf(h8, a));
  const auto b0 = hn::PromoteTo(d16, hn::LowerHalf(h8, b)), b1 = hn::PromoteTo(d16, hn::UpperHalf(h8, b));
  auto odd = hn::Zero(d32);
  auto sq = hn::ReorderWidenMulAccumulate(d32, a0, a0, hn::Zero(d32), odd);
  sq = hn::ReorderWidenMulAccumulate(d32, a1, a1, sq, odd);
  sq = hn::ReorderWidenMulAccumulate(d32, b0, b0, sq, odd);
  sq = hn::ReorderWidenMulAccumulate(d32, b1, b1, sq, odd);
  sq = hn::Add(sq, odd);
  const auto zero = hn::Zero(d8);
  CodeSums s;
  s.sum = static_cast<int32_t>(hn::GetLane(hn::SumOfLanes(du64, biased))) - 128 * 32;
  s.sum_sq = hn::GetLane(hn::SumOfLanes(d32, sq));
  s.zeros = static_cast<int32_t>(hn::CountTrue(d8, hn::Eq(a, zero)) + hn::CountTrue(d8, hn::Eq(b, zero)));
  return s;
}

// Code sums of `blocks` consecutive blocks of type (Q4_0 or Q8_0) at src into out.
void BlockCodeSums(uint32_t type, const uint8_t* src, uint64_t blocks, CodeSums* out) {
  const hn::FixedTag<int8_t, 16> d8;
  const hn::FixedTag<uint8_t, 16> du8;
  if (type == kQ8_0) {
    for (uint64_t i = 0; i < blocks; ++i, src += 34) {
      const auto* q = reinterpret_cast<const int8_t*>(src + 2);
      out[i] = sums_of(hn::LoadU(d8, q), hn::LoadU(d8, q + 16));
    }
    return;
  }
  const auto low_nibble = hn::Set(du8, 0x0f);
  const auto eight = hn::Set(d8, 8);
  for (uint64_t i = 0; i < blocks; ++i, src += 18) {
    const auto packed = hn::LoadU(du8, src + 2);
    const auto lo = hn::Sub(hn::BitCast(d8, hn::And(packed, low_nibble)), eight);
    const auto hi = hn::Sub(hn::BitCast(d8, hn::ShiftRight<4>(packed)), eight);
    out[i] = sums_of(lo, hi);
  }
}
#endif  // HWY_TARGET == HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu::quant_moments_detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph::cpu {

namespace quant_moments_detail {
HWY_EXPORT(BlockCodeSums);

// The smallest and largest code of one block (only asked for the few blocks whose scale could move the
// running extremes).
void code_range(uint32_t type, const uint8_t* block, int32_t* lo, int32_t* hi) {
  int32_t mn = 127, mx = -128;
  for (uint32_t i = 0; i < kBlockElements; ++i) {
    const int32_t q = type == kQ8_0 ? static_cast<int8_t>(block[2 + i])
                                    : static_cast<int32_t>((block[2 + i % 16] >> (i < 16 ? 0 : 4)) & 0x0f) - 8;
    mn = std::min(mn, q), mx = std::max(mx, q);
  }
  *lo = mn, *hi = mx;
}

// The largest fp16 magnitude (bits, sign cleared) whose value is <= v; 0 for v <= 0 or NaN. Rounding
// down keeps the threshold conservative.
uint32_t fp16_magnitude_at_most(float v) {
  if (!(v > 0)) return 0;
  if (v >= 65504.0f) return 0x7bffu;
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const int exponent = static_cast<int>(bits >> 23) - 127;
  if (exponent < -24) return 0;
  if (exponent < -14) return static_cast<uint32_t>(v * 0x1p24f);  // subnormal: m * 2^-24, truncated
  return static_cast<uint32_t>(exponent + 15) << 10 | (bits & 0x7fffffu) >> 13;
}

// The partial of one canonical block of n ggml blocks with code sums `sums`. An fp16 scale is
// m * 2^(shift - 24) with m < 2^11 and shift <= 29: sum(x) scaled by 2^24 and sum(x^2) by 2^48 are
// integers, accumulated per shift in 64 bits (|m * sum| < 2^23 and m^2 * sum_sq < 2^41 per block, 2,048
// blocks) and combined in 128 bits, exactly. Min and max come from the extreme codes of the blocks
// whose |scale| * the largest |code| could still pass the running extremes.
tm_moments_partial_v1 canonical_block(uint32_t type, const uint8_t* src, uint64_t n, const CodeSums* sums) {
  const uint64_t bytes = block_bytes(type);
  const float max_code = type == kQ8_0 ? 128.0f : 8.0f;  // the largest |code|
  int64_t acc1[32] = {}, acc2[32] = {};
  uint64_t finite = 0, nan = 0, inf = 0, zeros = 0;
  float lo = std::numeric_limits<float>::infinity(), hi = -std::numeric_limits<float>::infinity();
  uint32_t threshold = 0;  // fp16 magnitude bits from which a block may move lo or hi
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t* block = src + i * bytes;
    const uint16_t h = ggml_detail::load_u16(block);
    const CodeSums& c = sums[i];
    const uint32_t exponent = (h >> 10) & 31u, fraction = h & 1023u;
    if (exponent == 31) {  // inf or NaN scale: inf * 0 is NaN, inf * q is +-inf, NaN * q is NaN
      if (fraction) nan += kBlockElements;
      else nan += static_cast<uint64_t>(c.zeros), inf += kBlockElements - static_cast<uint64_t>(c.zeros);
      continue;
    }
    finite += kBlockElements;
    const int64_t m = exponent ? 1024 + fraction : fraction;
    const uint32_t shift = exponent ? exponent - 1 : 0;
    const int64_t t1 = m * c.sum;
    acc1[shift] += (h & 0x8000u) ? -t1 : t1;
    acc2[shift] += m * m * c.sum_sq;
    zeros += m ? static_cast<uint64_t>(c.zeros) : kBlockElements;
    // |d| * max_code bounds the block's values; fp16 magnitudes order like the values they encode, so
    // blocks below the threshold (the bound cannot pass the running extremes) are skipped on bits alone.
    if ((h & 0x7fffu) >= threshold) {
      const float d = ggml_detail::fp16_to_f32(h);
      int32_t qlo, qhi;
      code_range(type, block, &qlo, &qhi);
      const float a = d * static_cast<float>(qlo), b = d * static_cast<float>(qhi);
      lo = std::min(lo, std::min(a, b));
      hi = std::max(hi, std::max(a, b));
      threshold = fp16_magnitude_at_most(std::min(-lo, hi) / max_code);
    }
  }
  tm_moments_partial_v1 p{};
  p.count = n * kBlockElements, p.finite_count = finite, p.nan_count = nan, p.inf_count = inf, p.zero_count = zeros;
  p.min = std::numeric_limits<double>::infinity(), p.max = -std::numeric_limits<double>::infinity();
  if (finite == 0) return p;
  p.min = lo, p.max = hi, p.abs_max = std::max(std::fabs(p.min), std::fabs(p.max));
  __int128 s1 = 0, s2 = 0;
  for (int k = 0; k < 32; ++k) s1 += static_cast<__int128>(acc1[k]) << k, s2 += static_cast<__int128>(acc2[k]) << (2 * k);
  const double scaled = static_cast<double>(s1);  // correctly rounded (libgcc)
  p.sum = std::ldexp(scaled, -24);
  p.sum_err = std::ldexp(static_cast<double>(s1 - static_cast<__int128>(scaled)), -24);
  p.mean = p.sum / static_cast<double>(finite);
  // n * s2 < 2^126 and s1^2 < 2^126 for n <= 65,536: the difference is exact in 128 bits.
  const __int128 numerator = static_cast<__int128>(finite) * s2 - s1 * s1;
  p.m2 = std::ldexp(static_cast<double>(numerator) / static_cast<double>(finite), -48);
  return p;
}

}  // namespace quant_moments_detail

uint64_t quant_moments_format_mask() {
  return (uint64_t{1} << quant_moments_detail::kQ4_0) | (uint64_t{1} << quant_moments_detail::kQ8_0);
}

tm_status run_quant_moments(const tm_kernel_call_v1& c, std::string* error) {
  using namespace quant_moments_detail;
  if (c.params_size < sizeof(tm_dequantize_ggml_params_v1) || !c.params) {
    *error = "quant.moments: params missing";
    return TM_ERR_INVALID_ARGUMENT;
  }
  const uint32_t type = static_cast<const tm_dequantize_ggml_params_v1*>(c.params)->ggml_type;
  if (!(quant_moments_format_mask() >> type & 1) || type >= 64) {
    *error = "quant.moments: no kernel for ggml type " + std::to_string(type);
    return TM_ERR_UNSUPPORTED;
  }
  const uint64_t canonical = (c.element_count + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
  if (c.element_count % kBlockElements || c.output_size < canonical * sizeof(tm_moments_partial_v1)) {
    *error = "quant.moments: not whole blocks, or output too small";
    return TM_ERR_INVALID_ARGUMENT;
  }
  const auto* src = static_cast<const uint8_t*>(c.input);
  auto* out = static_cast<tm_moments_partial_v1*>(c.output);
  constexpr uint64_t kPerCanonical = TM_STATS_BLOCK_ELEMENTS / kBlockElements;
  const uint64_t blocks = c.element_count / kBlockElements, bytes = block_bytes(type);
  auto run = [&](uint64_t first, uint64_t last) {
    std::vector<CodeSums> sums(kPerCanonical);
    for (uint64_t k = first; k < last; ++k) {
      const uint64_t b0 = k * kPerCanonical, n = std::min(kPerCanonical, blocks - b0);
      const uint8_t* block = src + b0 * bytes;
      HWY_DYNAMIC_DISPATCH(BlockCodeSums)(type, block, n, sums.data());
      out[k] = canonical_block(type, block, n, sums.data());
    }
  };
  if (c.threads <= 1 || canonical <= 1) run(0, canonical);
  else ThreadPool::shared(c.threads).parallel_for(canonical, [&](uint64_t b, uint64_t e, unsigned) { run(b, e); });
  return TM_OK;
}

}  // namespace tmorph::cpu
#endif  // HWY_ONCE
