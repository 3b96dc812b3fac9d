#include "quant_moments_kernel.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quant_moments_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "support/thread_pool.h"
#include "dequant/ggml_dequant.h"
#include "tensormorph/op_contracts.h"

// Shared by every SIMD target (compiled once): what one block's codes sum to, and the exact accumulator
// of one canonical block's moments.
#ifndef TM_QUANT_MOMENTS_ACCUMULATOR
#define TM_QUANT_MOMENTS_ACCUMULATOR
namespace tmorph::cpu::quant_moments_detail {

struct CodeSums {
  int32_t sum;     // sum of the codes
  int32_t sum_sq;  // sum of their squares
  int32_t zeros;   // codes equal to 0
};
constexpr uint32_t kQ4_0 = 2, kQ8_0 = 8;  // ggml type ids
constexpr uint32_t kBlockElements = 32;
inline uint32_t block_bytes(uint32_t type) { return type == kQ8_0 ? 34 : 18; }

// Code i (< 32) of a block: Q8_0's int8, or Q4_0's nibble - 8 (byte i % 16, low nibble first).
inline int32_t code_at(uint32_t type, const uint8_t* block, uint32_t i) {
  return type == kQ8_0 ? static_cast<int8_t>(block[2 + i]) : static_cast<int32_t>((block[2 + i % 16] >> (i < 16 ? 0 : 4)) & 0x0f) - 8;
}

// The code sums of one block, one code at a time (tails, and targets without 128-bit vectors).
inline CodeSums scalar_sums(uint32_t type, const uint8_t* block) {
  CodeSums s{0, 0, 0};
  for (uint32_t i = 0; i < kBlockElements; ++i) {
    const int32_t q = code_at(type, block, i);
    s.sum += q, s.sum_sq += q * q, s.zeros += q == 0;
  }
  return s;
}

// The smallest and largest code of one block (only asked for the few blocks whose scale could move the
// running extremes).
inline void code_range(uint32_t type, const uint8_t* block, int32_t* lo, int32_t* hi) {
  int32_t mn = 127, mx = -128;
  for (uint32_t i = 0; i < kBlockElements; ++i) {
    const int32_t q = code_at(type, block, i);
    mn = std::min(mn, q), mx = std::max(mx, q);
  }
  *lo = mn, *hi = mx;
}

// The largest fp16 magnitude (bits, sign cleared) whose value is <= v; 0 for v <= 0 or NaN. Rounding
// down keeps the threshold conservative.
inline uint32_t fp16_magnitude_at_most(float v) {
  if (!(v > 0)) return 0;
  if (v >= 65504.0f) return 0x7bffu;
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const int exponent = static_cast<int>(bits >> 23) - 127;
  if (exponent < -24) return 0;
  if (exponent < -14) return static_cast<uint32_t>(v * 0x1p24f);  // subnormal: m * 2^-24, truncated
  return static_cast<uint32_t>(exponent + 15) << 10 | (bits & 0x7fffffu) >> 13;
}

// The moments of one canonical block (at most 2,048 ggml blocks), exactly. An fp16 scale is
// m * 2^(shift - 24) with m < 2^11 and shift <= 29, so sum(x) scaled by 2^24 and sum(x^2) scaled by 2^48
// are integers. Blocks added one at a time go to 64-bit bins per shift (|m * sum| < 2^23 and
// m^2 * sum_sq < 2^41 per block); the SIMD path adds its own lane totals (`lanes1`, `lanes2`, already
// shifted, exact in 128 bits). Min and max come from the extreme codes of the blocks whose
// |scale| * the largest |code| could still pass the running extremes.
struct Accumulator {
  explicit Accumulator(uint32_t t) : type(t), max_code(t == kQ8_0 ? 128.0f : 8.0f) {}

  // Min and max: a block can move them only if its scale's magnitude reaches the threshold (fp16
  // magnitudes order like the values they encode).
  void extremes(const uint8_t* block, uint16_t h) {
    if ((h & 0x7fffu) < threshold) return;
    const float d = ggml_detail::fp16_to_f32(h);
    int32_t qlo, qhi;
    code_range(type, block, &qlo, &qhi);
    const float a = d * static_cast<float>(qlo), b = d * static_cast<float>(qhi);
    lo = std::min(lo, std::min(a, b));
    hi = std::max(hi, std::max(a, b));
    threshold = fp16_magnitude_at_most(std::min(-lo, hi) / max_code);
  }

  // Everything about one block whose code sums are c.
  void add_block(const uint8_t* block, const CodeSums& c) {
    const uint16_t h = ggml_detail::load_u16(block);
    const uint32_t exponent = (h >> 10) & 31u, fraction = h & 1023u;
    if (exponent == 31) {  // inf or NaN scale: inf * 0 is NaN, inf * q is +-inf, NaN * q is NaN
      if (fraction) nan += kBlockElements;
      else nan += static_cast<uint64_t>(c.zeros), inf += kBlockElements - static_cast<uint64_t>(c.zeros);
      return;
    }
    finite += kBlockElements;
    const int64_t m = exponent ? 1024 + fraction : fraction;
    const uint32_t shift = exponent ? exponent - 1 : 0;
    const int64_t t1 = m * c.sum;
    bins1[shift] += (h & 0x8000u) ? -t1 : t1;
    bins2[shift] += m * m * c.sum_sq;
    zeros += m ? static_cast<uint64_t>(c.zeros) : kBlockElements;
    extremes(block, h);
  }

  tm_moments_partial_v1 finish(uint64_t n) const {
    tm_moments_partial_v1 p{};
    p.count = n * kBlockElements, p.finite_count = finite, p.nan_count = nan, p.inf_count = inf, p.zero_count = zeros;
    p.min = std::numeric_limits<double>::infinity(), p.max = -std::numeric_limits<double>::infinity();
    if (finite == 0) return p;
    p.min = lo, p.max = hi, p.abs_max = std::max(std::fabs(p.min), std::fabs(p.max));
    __int128 s1 = lanes1, s2 = lanes2;
    for (int k = 0; k < 32; ++k) s1 += static_cast<__int128>(bins1[k]) << k, s2 += static_cast<__int128>(bins2[k]) << (2 * k);
    const double scaled = static_cast<double>(s1);  // correctly rounded (libgcc)
    p.sum = std::ldexp(scaled, -24);
    p.sum_err = std::ldexp(static_cast<double>(s1 - static_cast<__int128>(scaled)), -24);
    p.mean = p.sum / static_cast<double>(finite);
    // n * s2 < 2^126 and s1^2 < 2^126 for n <= 65,536: the difference is exact in 128 bits.
    const __int128 numerator = static_cast<__int128>(finite) * s2 - s1 * s1;
    p.m2 = std::ldexp(static_cast<double>(numerator) / static_cast<double>(finite), -48);
    return p;
  }

  uint32_t type;
  float max_code;  // the largest |code|
  int64_t bins1[32] = {}, bins2[32] = {};
  __int128 lanes1 = 0, lanes2 = 0;
  uint64_t finite = 0, nan = 0, inf = 0, zeros = 0;
  float lo = std::numeric_limits<float>::infinity(), hi = -std::numeric_limits<float>::infinity();
  uint32_t threshold = 0;  // fp16 magnitude bits from which a block may move lo or hi
};

}  // namespace tmorph::cpu::quant_moments_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu::quant_moments_detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET == HWY_SCALAR || HWY_MAX_BYTES < 32
// Without 256-bit vectors: each block's code sums (128-bit vectors where there are some), then the
// block is added on its own.
#if HWY_TARGET != HWY_SCALAR
template <class V8>
HWY_INLINE CodeSums sums_of(V8 a, V8 b) {
  const hn::FixedTag<int8_t, 16> d8;
  const hn::FixedTag<uint8_t, 16> du8;
  const hn::FixedTag<int16_t, 8> d16;
  const hn::FixedTag<int32_t, 4> d32;
  const hn::FixedTag<uint64_t, 2> du64;
  const hn::Half<decltype(d8)> h8;
  const auto bias = hn::Set(du8, 0x80);  // codes biased to q + 128 (0..255), summed eight at a time
  const auto biased = hn::Add(hn::SumsOf8(hn::Xor(hn::BitCast(du8, a), bias)), hn::SumsOf8(hn::Xor(hn::BitCast(du8, b), bias)));
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

HWY_INLINE CodeSums block_sums(uint32_t type, const uint8_t* block) {
  const hn::FixedTag<int8_t, 16> d8;
  const hn::FixedTag<uint8_t, 16> du8;
  if (type == kQ8_0) {
    const auto* q = reinterpret_cast<const int8_t*>(block + 2);
    return sums_of(hn::LoadU(d8, q), hn::LoadU(d8, q + 16));
  }
  const auto packed = hn::LoadU(du8, block + 2);
  const auto eight = hn::Set(d8, 8);
  const auto lo = hn::Sub(hn::BitCast(d8, hn::And(packed, hn::Set(du8, 0x0f))), eight);
  const auto hi = hn::Sub(hn::BitCast(d8, hn::ShiftRight<4>(packed)), eight);
  return sums_of(lo, hi);
}
#else
HWY_INLINE CodeSums block_sums(uint32_t type, const uint8_t* block) { return scalar_sums(type, block); }
#endif

void AccumulateBlocks(uint32_t type, const uint8_t* src, uint64_t n, Accumulator& acc) {
  const uint64_t bytes = block_bytes(type);
  for (uint64_t i = 0; i < n; ++i) acc.add_block(src + i * bytes, block_sums(type, src + i * bytes));
}

#else
// With 256-bit vectors: four blocks at a time, and no per-block horizontal sums. Each block's code sum
// (biased to be non-negative), zero count and sum of squares are packed into one 64-bit lane,
//   sum << 40 | zeros << 32 | sum_sq,
// so one transposition brings four blocks' facts into the four lanes of one vector; the scales are
// gathered into the same lanes and the exact sums accumulated per lane (see Lanes).
using D8 = hn::FixedTag<uint8_t, 32>;
using D64 = hn::FixedTag<uint64_t, 4>;
using V64 = hn::Vec<D64>;

// The packed facts of one Q8_0 block, spread over four lanes of eight codes (their sum is the block's).
// Fields per lane: biased sum <= 2,040, zeros <= 8, sum of squares <= 2^17.
HWY_INLINE V64 q8_lanes(const uint8_t* block) {
  const D8 du8;
  const hn::FixedTag<int8_t, 32> d8;
  const hn::FixedTag<int16_t, 16> d16;
  const hn::FixedTag<int32_t, 8> d32;
  const D64 d64;
  const auto codes = hn::LoadU(du8, block + 2);
  const auto sum = hn::SumsOf8(hn::Xor(codes, hn::Set(du8, 0x80)));
  const auto zeros = hn::SumsOf8(hn::IfThenElseZero(hn::Eq(codes, hn::Zero(du8)), hn::Set(du8, 1)));
  const auto q = hn::BitCast(d8, codes);
  const hn::Half<decltype(d8)> h8;
  const auto lo = hn::PromoteTo(d16, hn::LowerHalf(h8, q)), hi = hn::PromoteTo(d16, hn::UpperHalf(h8, q));
  auto odd = hn::Zero(d32);
  auto sq = hn::ReorderWidenMulAccumulate(d32, lo, lo, hn::Zero(d32), odd);
  sq = hn::Add(hn::ReorderWidenMulAccumulate(d32, hi, hi, sq, odd), odd);  // each i32 lane <= 2^16
  const auto sq64 = hn::BitCast(d64, sq);
  const auto pairs = hn::Add(hn::And(sq64, hn::Set(d64, 0xffffffffu)), hn::ShiftRight<32>(sq64));
  return hn::Add(pairs, hn::Add(hn::ShiftLeft<32>(zeros), hn::ShiftLeft<40>(sum)));
}

// The packed facts of Q4_0 blocks a (lower half) and b (upper half), two lanes of sixteen codes each:
// [a, a, b, b]. Codes are nibble - 8; per lane the biased sum (of nibbles) <= 240, zeros (nibbles equal
// to 8) <= 16, sum of squares <= 1,024.
HWY_INLINE V64 q4_lanes(const uint8_t* a, const uint8_t* b) {
  const D8 du8;
  const D64 d64;
  const hn::Half<D8> h8;
  const auto packed = hn::Combine(du8, hn::LoadU(h8, b + 2), hn::LoadU(h8, a + 2));
  const auto lo = hn::And(packed, hn::Set(du8, 0x0f)), hi = hn::ShiftRight<4>(packed);
  alignas(32) static constexpr uint8_t kSquares[32] = {64, 49, 36, 25, 16, 9, 4, 1, 0, 1, 4, 9, 16, 25, 36, 49,
                                                       64, 49, 36, 25, 16, 9, 4, 1, 0, 1, 4, 9, 16, 25, 36, 49};
  alignas(32) static constexpr uint8_t kZero[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
                                                    0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
  const auto squares = hn::Load(du8, kSquares), zero = hn::Load(du8, kZero);
  const auto sum = hn::SumsOf8(hn::Add(lo, hi));
  const auto sq = hn::SumsOf8(hn::Add(hn::TableLookupBytes(squares, lo), hn::TableLookupBytes(squares, hi)));
  const auto zeros = hn::SumsOf8(hn::Add(hn::TableLookupBytes(zero, lo), hn::TableLookupBytes(zero, hi)));
  return hn::Add(sq, hn::Add(hn::ShiftLeft<32>(zeros), hn::ShiftLeft<40>(sum)));
}

// Per-lane exact sums: sum(x) * 2^24 in one signed 64-bit lane (|m * sum| < 2^23 shifted by <= 29, at most
// 512 blocks a lane: < 2^61), sum(x^2) * 2^48 in 128 bits (hi, lo) per lane (m^2 * sum_sq < 2^41 shifted
// by <= 58), zero counts.
struct Lanes {
  V64 sum, sq_lo, sq_hi, zeros;
};

// Adds four blocks (lane k is the block at base + offsets[k]; block j is in lane lane_of[j]) whose packed
// facts are `facts`. Returns false, adding nothing, when a scale is inf or NaN (the caller adds those blocks
// one by one).
HWY_INLINE bool add_four(const uint8_t* base, const uint64_t* offsets, const int* lane_of, V64 facts, uint64_t bias,
                         Lanes& l, Accumulator& acc) {
  const D64 d64;
  const hn::RebindToSigned<D64> di64;
  const hn::Repartition<int32_t, D64> di32;
  const hn::Repartition<uint32_t, D64> du32;
  // The scales, loaded one by one (faster here than a gather).
  alignas(32) uint64_t hv[4];
  for (int k = 0; k < 4; ++k) hv[k] = ggml_detail::load_u16(base + offsets[k]);
  const auto h = hn::Load(d64, hv);
  const auto exponent = hn::And(hn::ShiftRight<10>(h), hn::Set(d64, 31));
  if (!hn::AllFalse(d64, hn::Eq(exponent, hn::Set(d64, 31)))) return false;
  const auto normal = hn::VecFromMask(d64, hn::Ne(exponent, hn::Zero(d64)));
  const auto m = hn::Add(hn::And(h, hn::Set(d64, 1023)), hn::And(normal, hn::Set(d64, 1024)));
  const auto shift = hn::Sub(exponent, hn::And(normal, hn::Set(d64, 1)));
  const auto sum = hn::Sub(hn::ShiftRight<40>(facts), hn::Set(d64, bias));  // the codes' sum (may be < 0)
  const auto zeros = hn::And(hn::ShiftRight<32>(facts), hn::Set(d64, 0xff));
  const auto sq = hn::And(facts, hn::Set(d64, 0xffffffffu));
  auto t1 = hn::MulEven(hn::BitCast(di32, m), hn::BitCast(di32, sum));
  t1 = hn::IfThenElse(hn::RebindMask(di64, hn::Ne(hn::ShiftRight<15>(h), hn::Zero(d64))), hn::Neg(t1), t1);
  l.sum = hn::Add(l.sum, hn::BitCast(d64, t1) << shift);
  const auto m2 = hn::MulEven(hn::BitCast(du32, m), hn::BitCast(du32, m));
  const auto x = hn::MulEven(hn::BitCast(du32, m2), hn::BitCast(du32, sq));  // < 2^41
  const auto twice = hn::Add(shift, shift);
  const auto lo_add = x << twice, hi_add = x >> hn::Sub(hn::Set(d64, 64), twice);  // >> 64 is 0
  l.sq_lo = hn::Add(l.sq_lo, lo_add);
  const auto carry = hn::VecFromMask(d64, hn::Lt(l.sq_lo, lo_add));  // all ones: subtracting adds 1
  l.sq_hi = hn::Sub(hn::Add(l.sq_hi, hi_add), carry);
  l.zeros = hn::Add(l.zeros, hn::IfThenElse(hn::Eq(m, hn::Zero(d64)), hn::Set(d64, kBlockElements), zeros));
  acc.finite += 4 * kBlockElements;
  // Min and max: only blocks whose scale reaches the threshold are looked at, in block order (as every
  // other path and backend does: which of +0 and -0 an extreme keeps depends on the order).
  if (!hn::AllTrue(d64, hn::Lt(hn::And(h, hn::Set(d64, 0x7fff)), hn::Set(d64, acc.threshold)))) {
    for (int j = 0; j < 4; ++j) acc.extremes(base + offsets[lane_of[j]], static_cast<uint16_t>(hv[lane_of[j]]));
  }
  return true;
}

void AccumulateBlocks(uint32_t type, const uint8_t* src, uint64_t n, Accumulator& acc) {
  const D64 d64;
  const uint64_t bytes = block_bytes(type), groups = n / 4;
  // Lane order of the facts: Q8_0's transposition keeps blocks 0,1,2,3; Q4_0's gives 0,2,1,3.
  const uint64_t q8_order[4] = {0, bytes, 2 * bytes, 3 * bytes};
  const uint64_t q4_order[4] = {0, 2 * bytes, bytes, 3 * bytes};
  const uint64_t* offsets = type == kQ8_0 ? q8_order : q4_order;
  static constexpr int kQ8Lanes[4] = {0, 1, 2, 3}, kQ4Lanes[4] = {0, 2, 1, 3};  // the lane of block j
  const int* lane_of = type == kQ8_0 ? kQ8Lanes : kQ4Lanes;
  const uint64_t bias = type == kQ8_0 ? 128 * kBlockElements : 8 * kBlockElements;
  Lanes l{hn::Zero(d64), hn::Zero(d64), hn::Zero(d64), hn::Zero(d64)};
  for (uint64_t g = 0; g < groups; ++g) {
    const uint8_t* base = src + 4 * g * bytes;
    V64 facts;
    if (type == kQ8_0) {
      const auto p0 = q8_lanes(base), p1 = q8_lanes(base + bytes), p2 = q8_lanes(base + 2 * bytes),
                 p3 = q8_lanes(base + 3 * bytes);
      const auto t01 = hn::Add(hn::InterleaveLower(d64, p0, p1), hn::InterleaveUpper(d64, p0, p1));
      const auto t23 = hn::Add(hn::InterleaveLower(d64, p2, p3), hn::InterleaveUpper(d64, p2, p3));
      facts = hn::Add(hn::ConcatLowerLower(d64, t23, t01), hn::ConcatUpperUpper(d64, t23, t01));
    } else {
      const auto p01 = q4_lanes(base, base + bytes), p23 = q4_lanes(base + 2 * bytes, base + 3 * bytes);
      facts = hn::Add(hn::InterleaveLower(d64, p01, p23), hn::InterleaveUpper(d64, p01, p23));
    }
    if (add_four(base, offsets, lane_of, facts, bias, l, acc)) continue;
    for (uint64_t k = 0; k < 4; ++k) acc.add_block(base + k * bytes, scalar_sums(type, base + k * bytes));
  }
  for (uint64_t i = 4 * groups; i < n; ++i) acc.add_block(src + i * bytes, scalar_sums(type, src + i * bytes));
  alignas(32) uint64_t sum[4], lo[4], hi[4], zeros[4];
  hn::Store(l.sum, d64, sum);
  hn::Store(l.sq_lo, d64, lo);
  hn::Store(l.sq_hi, d64, hi);
  hn::Store(l.zeros, d64, zeros);
  for (int k = 0; k < 4; ++k) {
    acc.lanes1 += static_cast<int64_t>(sum[k]);
    acc.lanes2 += static_cast<__int128>(static_cast<unsigned __int128>(hi[k]) << 64 | lo[k]);
    acc.zeros += zeros[k];
  }
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu::quant_moments_detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph::cpu {

namespace quant_moments_detail {
HWY_EXPORT(AccumulateBlocks);
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
    for (uint64_t k = first; k < last; ++k) {
      const uint64_t b0 = k * kPerCanonical, n = std::min(kPerCanonical, blocks - b0);
      Accumulator acc(type);
      HWY_DYNAMIC_DISPATCH(AccumulateBlocks)(type, src + b0 * bytes, n, acc);
      out[k] = acc.finish(n);
    }
  };
  if (c.threads <= 1 || canonical <= 1) run(0, canonical);
  else ThreadPool::shared(c.threads).parallel_for(canonical, [&](uint64_t b, uint64_t e, unsigned) { run(b, e); });
  return TM_OK;
}

}  // namespace tmorph::cpu
#endif  // HWY_ONCE
