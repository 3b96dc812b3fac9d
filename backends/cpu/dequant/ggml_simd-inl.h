// Highway building blocks shared by the 32-element-group decoders of ggml_legacy.cpp and ggml_iquants.cpp
// (Q5_0, Q5_1, MXFP4, IQ4_NL, IQ4_XS) and by the lattice decoders of ggml_iquants.cpp (IQ2_XXS, IQ2_XS,
// IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M). Highway's -inl.h convention: included once per SIMD target from
// inside a file's foreach_target pass, so the guard toggles with HWY_TARGET_TOGGLE.
//
// A group's 16 quant bytes are turned into two vectors of 16 small int8 levels in 128-bit registers
// (nibble split, a 16-entry byte table lookup or the 5th bits from the packed high-bit mask), then each is
// widened exactly (int8 -> int32 -> float32, no rounding) and scaled with the float32 operations and
// operand order of ggml's scalar code. The HWY_SCALAR target has no 128-bit byte vectors: the decoders
// keep their scalar loops for it.
#if defined(TM_CPU_DEQUANT_GGML_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TM_CPU_DEQUANT_GGML_SIMD_INL_H_
#undef TM_CPU_DEQUANT_GGML_SIMD_INL_H_
#else
#define TM_CPU_DEQUANT_GGML_SIMD_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu::ggml_detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR

using GroupBytes = hn::Full128<int8_t>;  // 16 levels (or quant bytes) of one half-group
using GroupVec = hn::Vec<GroupBytes>;

// The scalings, lane by lane, in ggml's operand order (the project builds with -ffp-contract=off).
struct TimesScale {  // level * d (Q5_0, MXFP4)
  float d;
  template <class DF, class VF>
  HWY_INLINE VF operator()(DF df, VF level) const {
    return hn::Mul(level, hn::Set(df, d));
  }
};
struct ScaleTimes {  // d * level (IQ4_NL, IQ4_XS)
  float d;
  template <class DF, class VF>
  HWY_INLINE VF operator()(DF df, VF level) const {
    return hn::Mul(hn::Set(df, d), level);
  }
};
struct TimesScalePlusMin {  // level * d + m (Q5_1)
  float d, m;
  template <class DF, class VF>
  HWY_INLINE VF operator()(DF df, VF level) const {
    return hn::Add(hn::Mul(level, hn::Set(df, d)), hn::Set(df, m));
  }
};

// out[i] = scale(float(v[i])) for the lanes of the int8 vector v (d8 describes it): one float vector
// when the target holds that many float lanes (AVX-512: all 16), else its halves in turn.
template <class D8, class Scale>
HWY_INLINE void StoreScaled(D8 d8, hn::Vec<D8> v, const Scale& scale, float* HWY_RESTRICT out) {
  constexpr size_t kLanes = hn::MaxLanes(D8());
  if constexpr (kLanes * sizeof(float) <= HWY_MAX_BYTES) {
    const hn::Rebind<int32_t, D8> di;
    const hn::Rebind<float, D8> df;
    hn::StoreU(scale(df, hn::ConvertTo(df, hn::PromoteTo(di, v))), df, out);
  } else {
    const hn::Half<D8> dh;
    StoreScaled(dh, hn::LowerHalf(dh, v), scale, out);
    StoreScaled(dh, hn::UpperHalf(dh, v), scale, out + kLanes / 2);
  }
  (void)d8;
}

// The two half-groups of 16 quant bytes: low nibbles (elements 0-15) and high nibbles (16-31), as 0..15.
struct Nibbles {
  GroupVec low, high;
};
HWY_INLINE Nibbles SplitNibbles(const uint8_t* HWY_RESTRICT qs) {
  const hn::Full128<uint8_t> du;
  const GroupBytes d8;
  const auto bytes = hn::LoadU(du, qs);
  return {hn::BitCast(d8, hn::And(bytes, hn::Set(du, uint8_t{0x0F}))), hn::BitCast(d8, hn::ShiftRight<4>(bytes))};
}

// One 32-element group of a 4-bit codebook format (IQ4_NL, IQ4_XS, MXFP4): out[j] = scale(table[code j]),
// byte j of qs holding code j (low nibble) and code j + 16 (high nibble). `table` holds the 16 int8 levels.
template <class Scale>
HWY_INLINE void DecodeCodebookGroup(GroupVec table, const uint8_t* HWY_RESTRICT qs, const Scale& scale,
                                    float* HWY_RESTRICT out) {
  const GroupBytes d8;
  const Nibbles n = SplitNibbles(qs);
  StoreScaled(d8, hn::TableLookupBytes(table, n.low), scale, out);
  StoreScaled(d8, hn::TableLookupBytes(table, n.high), scale, out + 16);
}

// One 32-element Q5 group: 4-bit nibbles as above plus a 5th bit per element from the little-endian 32-bit
// mask at qh (bit j = element j). kSigned (Q5_0): level = q - 16, written as nibble | (bit ? 0 : 0xF0)
// read as int8; else (Q5_1): level = q = nibble | (bit ? 0x10 : 0).
template <bool kSigned, class Scale>
HWY_INLINE void DecodeQ5Group(const uint8_t* HWY_RESTRICT qh, const uint8_t* HWY_RESTRICT qs, const Scale& scale,
                              float* HWY_RESTRICT out) {
  const GroupBytes d8;
  const Nibbles n = SplitNibbles(qs);
  const auto fifth_low = hn::LoadMaskBits(d8, qh);       // bits 0-15: elements 0-15
  const auto fifth_high = hn::LoadMaskBits(d8, qh + 2);  // bits 16-31: elements 16-31
  if constexpr (kSigned) {
    const auto minus16 = hn::Set(d8, int8_t{-16});  // 0xF0
    StoreScaled(d8, hn::Or(n.low, hn::IfThenZeroElse(fifth_low, minus16)), scale, out);
    StoreScaled(d8, hn::Or(n.high, hn::IfThenZeroElse(fifth_high, minus16)), scale, out + 16);
  } else {
    const auto sixteen = hn::Set(d8, int8_t{16});
    StoreScaled(d8, hn::Or(n.low, hn::IfThenElseZero(fifth_low, sixteen)), scale, out);
    StoreScaled(d8, hn::Or(n.high, hn::IfThenElseZero(fifth_high, sixteen)), scale, out + 16);
  }
}

// ---- Lattice formats: grid points of 8 (or two of 4) int8 values, 16 elements (two points) at a time.
//
// The grid rows and the sign rows (8 int8 lanes of +1 / -1 per sign byte) are plain 8-byte loads; two
// points are joined into one 16-lane int8 vector, widened exactly and scaled lane by lane with ggml's
// float operations in ggml's order.

using PointBytes = hn::Full64<int8_t>;  // one 8-element point (or two 4-element ones)
using PointVec = hn::Vec<PointBytes>;

// The 8 values of a grid row (int8, or uint8 below 128) at `row` (any alignment).
template <class T>
HWY_INLINE PointVec LoadPoint8(const T* HWY_RESTRICT row) {
  static_assert(sizeof(T) == 1);
  return hn::BitCast(PointBytes(), hn::LoadU(hn::Full64<T>(), row));
}

// Two 4-value grid rows (uint8 below 128) as one 8-lane point: `first` in lanes 0-3.
template <class T>
HWY_INLINE PointVec LoadPoints4(const T* HWY_RESTRICT first, const T* HWY_RESTRICT second) {
  static_assert(sizeof(T) == 1);
  const hn::Full64<T> d;
  const hn::Half<decltype(d)> dh;
  return hn::BitCast(PointBytes(), hn::Combine(d, hn::LoadU(dh, second), hn::LoadU(dh, first)));
}

// Two points as the 16 lanes of one vector: `first` in lanes 0-7.
HWY_INLINE GroupVec JoinPoints(PointVec first, PointVec second) { return hn::Combine(GroupBytes(), second, first); }

// out[i] = (db * float(level[i])) * float(sign[i]) for the lanes of the int8 vectors level and sign (sign
// lanes +1 or -1), as ggml's `db * grid[j] * (sign bit ? -1.f : 1.f)`; halved as StoreScaled is.
template <class D8>
HWY_INLINE void StoreSignedScaled(D8 d8, hn::Vec<D8> level, hn::Vec<D8> sign, float db, float* HWY_RESTRICT out) {
  constexpr size_t kLanes = hn::MaxLanes(D8());
  if constexpr (kLanes * sizeof(float) <= HWY_MAX_BYTES) {
    const hn::Rebind<int32_t, D8> di;
    const hn::Rebind<float, D8> df;
    const auto g = hn::ConvertTo(df, hn::PromoteTo(di, level));
    const auto s = hn::ConvertTo(df, hn::PromoteTo(di, sign));
    hn::StoreU(hn::Mul(hn::Mul(hn::Set(df, db), g), s), df, out);
  } else {
    const hn::Half<D8> dh;
    StoreSignedScaled(dh, hn::LowerHalf(dh, level), hn::LowerHalf(dh, sign), db, out);
    StoreSignedScaled(dh, hn::UpperHalf(dh, level), hn::UpperHalf(dh, sign), db, out + kLanes / 2);
  }
  (void)d8;
}

// IQ1 (IQ1_S, IQ1_M): x = dl * (grid + delta), grid in {-1, 0, 1}, delta = +-1/8. The int8 lane
// 8 * grid + (+-1) holds (grid + delta) * 8; times 1/8 in float it is exactly the float grid + delta
// (both are exact: -1.125 .. 1.125 in steps of 1/8, never zero), so dl * that is ggml's value bit for bit.
struct ScaleTimesEighths {
  float dl;
  template <class DF, class VF>
  HWY_INLINE VF operator()(DF df, VF eighths) const {
    return hn::Mul(hn::Set(df, dl), hn::Mul(eighths, hn::Set(df, 0.125f)));
  }
};
// The int8 lanes 8 * grid + delta_sign (delta_sign lanes +1 or -1) of 16 IQ1 elements.
HWY_INLINE GroupVec Iq1Eighths(GroupVec grid, GroupVec delta_sign) {
  return hn::Add(hn::ShiftLeft<3>(grid), delta_sign);
}

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu::ggml_detail
HWY_AFTER_NAMESPACE();

#endif  // TM_CPU_DEQUANT_GGML_SIMD_INL_H_
