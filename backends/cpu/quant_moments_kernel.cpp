#include "quant_moments_kernel.h"

#include <algorithm>
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
  int32_t min, max;
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
  CodeSums s{0, 0, 127, -128, 0};
  for (uint32_t i = 0; i < kBlockElements; ++i) {
    s.sum += q[i], s.sum_sq += q[i] * q[i], s.zeros += q[i] == 0;
    s.min = std::min<int32_t>(s.min, q[i]), s.max = std::max<int32_t>(s.max, q[i]);
  }
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
  const hn::FixedTag<uint16_t, 8> du16;
  const hn::FixedTag<uint32_t, 4> du32;
  const hn::FixedTag<uint64_t, 2> du64;
  const hn::Half<decltype(d8)> h8;
  const hn::Half<decltype(du16)> hu16;
  // Sum: the codes biased to q + 128 (0..255) summed eight at a time.
  const auto bias = hn::Set(du8, 0x80);
  const auto biased = hn::Add(hn::SumsOf8(hn::Xor(hn::BitCast(du8, a), bias)), hn::SumsOf8(hn::Xor(hn::BitCast(du8, b), bias)));
  // Squares: q^2 <= 16384, so two of them fit 16 unsigned bits; pairs are then widened to 32.
  const auto a0 = hn::PromoteTo(d16, hn::LowerHalf(h8, a)), a1 = hn::PromoteTo(d16, hn::UpperHalf(h8, a));
  const auto b0 = hn::PromoteTo(d16, hn::LowerHalf(h8, b)), b1 = hn::PromoteTo(d16, hn::UpperHalf(h8, b));
  const auto sa = hn::BitCast(du16, hn::Add(hn::Mul(a0, a0), hn::Mul(a1, a1)));
  const auto sb = hn::BitCast(du16, hn::Add(hn::Mul(b0, b0), hn::Mul(b1, b1)));
  const auto sq = hn::Add(hn::Add(hn::PromoteTo(du32, hn::LowerHalf(hu16, sa)), hn::PromoteTo(du32, hn::UpperHalf(hu16, sa))),
                          hn::Add(hn::PromoteTo(du32, hn::LowerHalf(hu16, sb)), hn::PromoteTo(du32, hn::UpperHalf(hu16, sb))));
  const auto lo = hn::Min(hn::Min(a0, a1), hn::Min(b0, b1)), hi = hn::Max(hn::Max(a0, a1), hn::Max(b0, b1));
  const auto zero = hn::Zero(d8);
  CodeSums s;
  s.sum = static_cast<int32_t>(hn::GetLane(hn::SumOfLanes(du64, biased))) - 128 * 32;
  s.sum_sq = static_cast<int32_t>(hn::GetLane(hn::SumOfLanes(du32, sq)));
  s.min = hn::GetLane(hn::MinOfLanes(d16, lo));
  s.max = hn::GetLane(hn::MaxOfLanes(d16, hi));
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

// Exact sums of one canonical block: sum(x) scaled by 2^24 and sum(x^2) by 2^48. An fp16 scale is
// m * 2^(shift - 24) with m < 2^11 and shift <= 29, so every term is an integer below 2^99 and a
// canonical block's total fits in 128 bits (docs in op_contracts.h).
struct ExactBlock {
  tm_moments_partial_v1 p;
  __int128 s1 = 0, s2 = 0;
};

// Adds one block of 32 values: scale bits h, code sums c; `codes` are the block's 32 codes for the
// rare non-finite scale, whose values are counted one by one.
void add_block(ExactBlock& b, uint16_t h, const CodeSums& c) {
  tm_moments_partial_v1& p = b.p;
  p.count += kBlockElements;
  const uint32_t exponent = (h >> 10) & 31u, fraction = h & 1023u;
  const bool negative = h & 0x8000u;
  if (exponent == 31) {  // inf or NaN scale: inf * 0 is NaN, inf * q is +-inf, NaN * q is NaN
    const uint64_t zero_codes = static_cast<uint64_t>(c.zeros);
    if (fraction) p.nan_count += kBlockElements;
    else p.nan_count += zero_codes, p.inf_count += kBlockElements - zero_codes;
    return;
  }
  p.finite_count += kBlockElements;
  const int64_t m = exponent ? 1024 + fraction : fraction;
  const int shift = exponent ? static_cast<int>(exponent) - 1 : 0;
  if (m == 0) {
    p.zero_count += kBlockElements;
  } else {
    p.zero_count += static_cast<uint64_t>(c.zeros);
    const __int128 t1 = static_cast<__int128>(m * c.sum) << shift;
    b.s1 += negative ? -t1 : t1;
    b.s2 += static_cast<__int128>(m * m * c.sum_sq) << (2 * shift);
  }
  const float d = ggml_detail::fp16_to_f32(h);
  const double lo = static_cast<double>(d * static_cast<float>(negative ? c.max : c.min));
  const double hi = static_cast<double>(d * static_cast<float>(negative ? c.min : c.max));
  p.min = std::min(p.min, lo);
  p.max = std::max(p.max, hi);
  p.abs_max = std::max(p.abs_max, std::max(std::fabs(lo), std::fabs(hi)));
}

double to_double(__int128 v) { return static_cast<double>(v); }  // correctly rounded (libgcc)

tm_moments_partial_v1 finish_block(const ExactBlock& b) {
  tm_moments_partial_v1 p = b.p;
  if (p.finite_count == 0) {
    p.min = std::numeric_limits<double>::infinity(), p.max = -std::numeric_limits<double>::infinity();
    return p;
  }
  const double scaled = to_double(b.s1);
  p.sum = std::ldexp(scaled, -24);
  p.sum_err = std::ldexp(to_double(b.s1 - static_cast<__int128>(scaled)), -24);
  const double n = static_cast<double>(p.finite_count);
  p.mean = p.sum / n;
  // n * s2 < 2^126 and s1^2 < 2^126 for n <= 65,536: the difference is exact in 128 bits.
  const __int128 numerator = static_cast<__int128>(p.finite_count) * b.s2 - b.s1 * b.s1;
  p.m2 = std::ldexp(to_double(numerator) / n, -48);
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
      ExactBlock acc;
      acc.p = tm_moments_partial_v1{};
      acc.p.min = std::numeric_limits<double>::infinity(), acc.p.max = -std::numeric_limits<double>::infinity();
      for (uint64_t i = 0; i < n; ++i) add_block(acc, ggml_detail::load_u16(block + i * bytes), sums[i]);
      out[k] = finish_block(acc);
    }
  };
  if (c.threads <= 1 || canonical <= 1) run(0, canonical);
  else ThreadPool::shared(c.threads).parallel_for(canonical, [&](uint64_t b, uint64_t e, unsigned) { run(b, e); });
  return TM_OK;
}

}  // namespace tmorph::cpu
#endif  // HWY_ONCE
