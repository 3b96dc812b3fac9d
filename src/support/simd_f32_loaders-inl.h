// Highway loaders that widen a vector's worth of consecutive stored floats (f32, bf16, f16, the two
// float8 formats) to f32 lanes, exactly: every value of these formats is an f32, infinities and NaNs
// included. Shared by the CPU backend's moments kernels and the pyramid's tile kernels (src/lod).
//
// A per-target header (Highway's "-inl" convention): include it after <hwy/highway.h> from a file
// compiled once per target through <hwy/foreach_target.h>. Everything is in tmorph::HWY_NAMESPACE.
#if defined(TM_SUPPORT_SIMD_F32_LOADERS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TM_SUPPORT_SIMD_F32_LOADERS_INL_H_
#undef TM_SUPPORT_SIMD_F32_LOADERS_INL_H_
#else
#define TM_SUPPORT_SIMD_F32_LOADERS_INL_H_
#endif

#include <hwy/highway.h>

#include <cmath>
#include <cstdint>
#include <limits>

HWY_BEFORE_NAMESPACE();
namespace tmorph {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Loaders produce Lanes(df) consecutive elements as f32, exactly (every value of these formats is an
// f32). The f64 path promotes them.
struct LoadF32 {
  template <class DF> static hn::Vec<DF> Load(DF df, const uint8_t* p) {
    return hn::LoadU(df, reinterpret_cast<const float*>(p));
  }
};
// Widens small-float magnitudes (bit patterns without the sign, zero-extended to u32) with
// `mantissa_bits` and exponent `bias` to f32, exactly. Normal numbers are re-biased in the integer
// domain; subnormals are converted from their integer mantissa and scaled by a power of two. No f32
// subnormal is ever an operand (those cost microcode assists on some CPUs). The caller patches the
// format's specials (infinities, NaNs) and ORs in the sign.
template <class DU>
hn::Vec<hn::Rebind<float, DU>> SmallFloatToF32(DU du, hn::Vec<DU> magnitude, int mantissa_bits, int bias) {
  const hn::Rebind<float, DU> df;
  const hn::Rebind<int32_t, DU> di;
  const auto normal = hn::Add(hn::ShiftLeftSame(magnitude, 23 - mantissa_bits),
                              hn::Set(du, static_cast<uint32_t>(127 - bias) << 23));
  const auto subnormal = hn::Mul(hn::ConvertTo(df, hn::BitCast(di, magnitude)),
                                 hn::Set(df, std::ldexp(1.0f, 1 - bias - mantissa_bits)));
  const auto is_subnormal = hn::Lt(magnitude, hn::Set(du, 1u << mantissa_bits));
  return hn::IfThenElse(hn::RebindMask(df, is_subnormal), subnormal, hn::BitCast(df, normal));
}
struct LoadBF16 {
  template <class DF> static hn::Vec<DF> Load(DF df, const uint8_t* p) {
    const hn::Rebind<uint16_t, DF> d16;
    const hn::Rebind<uint32_t, DF> d32;
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(d32, hn::LoadU(d16, reinterpret_cast<const uint16_t*>(p)))));
  }
};
// Small floats stored in `Bits`-wide unsigned words, with one sign bit, then exponent, then
// `kMantissa` mantissa bits. Specials follow the format's own rule.
template <class Bits, int kMantissa, int kBias, bool kIeeeSpecials>
struct LoadSmallFloat {
  template <class DF> static hn::Vec<DF> Load(DF df, const uint8_t* p) {
    constexpr int kWidth = 8 * sizeof(Bits);
    constexpr uint32_t kMagnitudeMask = (1u << (kWidth - 1)) - 1;
    const hn::Rebind<Bits, DF> dsrc;
    const hn::Rebind<uint32_t, DF> d32;
    const auto raw = hn::PromoteTo(d32, hn::LoadU(dsrc, reinterpret_cast<const Bits*>(p)));
    const auto magnitude = hn::And(raw, hn::Set(d32, kMagnitudeMask));
    const auto sign = hn::ShiftLeft<32 - kWidth>(hn::AndNot(hn::Set(d32, kMagnitudeMask), raw));
    const auto v = hn::Or(SmallFloatToF32(d32, magnitude, kMantissa, kBias), hn::BitCast(df, sign));
    if constexpr (kIeeeSpecials) {
      // Exponent all ones: infinity or NaN; keep the mantissa so NaN stays NaN.
      const uint32_t exponent_mask = kMagnitudeMask & ~((1u << kMantissa) - 1);
      const auto special = hn::Eq(hn::And(raw, hn::Set(d32, exponent_mask)), hn::Set(d32, exponent_mask));
      const auto special_bits =
          hn::Or(hn::Or(hn::ShiftLeft<23 - kMantissa>(magnitude), hn::Set(d32, 0x7F800000u)), sign);
      return hn::IfThenElse(hn::RebindMask(df, special), hn::BitCast(df, special_bits), v);
    } else {
      // OCP E4M3FN: no infinities; S.1111.111 is the only NaN.
      const auto nan = hn::Eq(magnitude, hn::Set(d32, kMagnitudeMask));
      return hn::IfThenElse(hn::RebindMask(df, nan), hn::Set(df, std::numeric_limits<float>::quiet_NaN()), v);
    }
  }
};
#if HWY_TARGET <= HWY_AVX2
// x86 with F16C: the hardware conversion is exact for every half, infinities and NaNs included.
// (Highway's SSE4 fallback for this conversion does not handle infinities; ours below does.)
struct LoadF16 {
  template <class DF> static hn::Vec<DF> Load(DF df, const uint8_t* p) {
    return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), reinterpret_cast<const hwy::float16_t*>(p)));
  }
};
#else
using LoadF16 = LoadSmallFloat<uint16_t, 10, 15, true>;
#endif
using LoadF8E5M2 = LoadSmallFloat<uint8_t, 2, 15, true>;
using LoadF8E4M3FN = LoadSmallFloat<uint8_t, 3, 7, false>;

}  // namespace HWY_NAMESPACE
}  // namespace tmorph
HWY_AFTER_NAMESPACE();

#endif  // TM_SUPPORT_SIMD_F32_LOADERS_INL_H_
