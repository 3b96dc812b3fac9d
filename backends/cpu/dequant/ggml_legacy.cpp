// ggml's original 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1) and MXFP4.
//
// Each block holds one or two fp16 fields (or an E8M0 exponent), then its quants. The two nibbles of
// byte j are elements j (low) and j + 16 (high). Each output is formed exactly as ggml forms it: the
// integer level converted to float, times the scale, then plus the min where the format has one.
//
// Q4_0, Q8_0, Q5_0, Q5_1 and MXFP4 use Highway (dynamic dispatch; this file is compiled once per
// target): the same operations lane by lane (exact int -> float conversion, then ggml's multiply and add),
// so every target gives the same bits. Q5_0/Q5_1 take the 5th bits as a byte mask loaded from the packed
// qh word, MXFP4 looks its E2M1 codes up in a 16-byte table (ggml_simd-inl.h); the HWY_SCALAR target keeps
// the scalar block loops below. Q4_1 and Q8_1 are plain loops, branch-free over the elements.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "dequant/ggml_legacy.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>

#include "ggml_dequant.h"
#include "ggml_simd-inl.h"

#ifndef TM_GGML_LEGACY_SHARED
#define TM_GGML_LEGACY_SHARED
namespace tmorph::cpu::ggml_detail {
namespace {

constexpr int kQk = 32;  // elements per legacy block

// The 5th bit of element j (j < 32) of a Q5 block, as 0 or 16. qh is the block's 32-bit high-bit mask.
inline int high_bit_16(uint32_t qh, int j) { return static_cast<int>((qh >> j) & 1u) << 4; }

// Scalar block decoders of the formats that also have Highway ones (used by the HWY_SCALAR target).

// Q5_0 (22 bytes): fp16 d, 32-bit mask of 5th bits (bit j = element j), 16 bytes of nibbles.
// x = (q - 16) * d.
inline void q5_0_block(const uint8_t* b, float* y) {
  const float d = load_fp16(b);
  const uint32_t qh = load_u32(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < kQk / 2; ++j) {
    y[j] = static_cast<float>(((qs[j] & 0x0F) | high_bit_16(qh, j)) - 16) * d;
    y[j + kQk / 2] = static_cast<float>(((qs[j] >> 4) | high_bit_16(qh, j + kQk / 2)) - 16) * d;
  }
}

// Q5_1 (24 bytes): fp16 d, fp16 m, 32-bit mask of 5th bits, 16 bytes of nibbles. x = q * d + m.
inline void q5_1_block(const uint8_t* b, float* y) {
  const float d = load_fp16(b);
  const float m = load_fp16(b + 2);
  const uint32_t qh = load_u32(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < kQk / 2; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0F) | high_bit_16(qh, j)) * d + m;
    y[j + kQk / 2] = static_cast<float>((qs[j] >> 4) | high_bit_16(qh, j + kQk / 2)) * d + m;
  }
}

// MXFP4 (17 bytes): E8M0 exponent e, 16 bytes of E2M1 codes. x = (2 * e2m1(code)) * 2^(e - 128).
inline void mxfp4_block(const uint8_t* b, float* y) {
  const float d = e8m0_half_to_f32(b[0]);
  const uint8_t* qs = b + 1;
  for (int j = 0; j < kQk / 2; ++j) {
    y[j] = static_cast<float>(kFp4Values[qs[j] & 0x0F]) * d;
    y[j + kQk / 2] = static_cast<float>(kFp4Values[qs[j] >> 4]) * d;
  }
}

}  // namespace
}  // namespace tmorph::cpu::ggml_detail
#endif  // TM_GGML_LEGACY_SHARED

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu::ggml_detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Q4_0 (18 bytes): fp16 d, 16 bytes of nibbles. x = (q - 8) * d.
void DecodeQ4_0(const uint8_t* src, uint64_t blocks, float* dst) {
  const hn::CappedTag<float, 16> df;  // at most 16 lanes: a half-block is a whole number of vectors
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> d8;
  const size_t n = hn::Lanes(df);
  const auto low_mask = hn::Set(di, 0x0F), eight = hn::Set(di, 8);
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 18;
    float* y = dst + i * 32;
    const auto d = hn::Set(df, load_fp16(b));
    for (size_t j = 0; j < 16; j += n) {
      const auto bytes = hn::PromoteTo(di, hn::LoadU(d8, b + 2 + j));
      const auto low = hn::Sub(hn::And(bytes, low_mask), eight);
      const auto high = hn::Sub(hn::ShiftRight<4>(bytes), eight);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, low), d), df, y + j);
      hn::StoreU(hn::Mul(hn::ConvertTo(df, high), d), df, y + 16 + j);
    }
  }
}

// Q8_0 (34 bytes): fp16 d, 32 signed bytes. x = q * d.
void DecodeQ8_0(const uint8_t* src, uint64_t blocks, float* dst) {
  const hn::CappedTag<float, 32> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t n = hn::Lanes(df);
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 34;
    float* y = dst + i * 32;
    const auto d = hn::Set(df, load_fp16(b));
    const auto* qs = reinterpret_cast<const int8_t*>(b + 2);
    for (size_t j = 0; j < 32; j += n)
      hn::StoreU(hn::Mul(hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, qs + j))), d), df, y + j);
  }
}

// Q5_0 (22 bytes): fp16 d @0, qh @2, qs[16] @6. x = (q - 16) * d.
void DecodeQ5_0(const uint8_t* src, uint64_t blocks, float* dst) {
#if HWY_TARGET == HWY_SCALAR
  for_each_block<22, kQk>(src, blocks, dst, q5_0_block);
#else
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 22;
    DecodeQ5Group<true>(b + 2, b + 6, TimesScale{load_fp16(b)}, dst + i * kQk);
  }
#endif
}

// Q5_1 (24 bytes): fp16 d @0, fp16 m @2, qh @4, qs[16] @8. x = q * d + m.
void DecodeQ5_1(const uint8_t* src, uint64_t blocks, float* dst) {
#if HWY_TARGET == HWY_SCALAR
  for_each_block<24, kQk>(src, blocks, dst, q5_1_block);
#else
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 24;
    DecodeQ5Group<false>(b + 4, b + 8, TimesScalePlusMin{load_fp16(b), load_fp16(b + 2)}, dst + i * kQk);
  }
#endif
}

// MXFP4 (17 bytes): E8M0 e @0, qs[16] @1. x = kFp4Values[code] * 2^(e - 128).
void DecodeMXFP4(const uint8_t* src, uint64_t blocks, float* dst) {
#if HWY_TARGET == HWY_SCALAR
  for_each_block<17, kQk>(src, blocks, dst, mxfp4_block);
#else
  const auto table = hn::LoadU(GroupBytes(), kFp4Values.data());
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 17;
    DecodeCodebookGroup(table, b + 1, TimesScale{e8m0_half_to_f32(b[0])}, dst + i * kQk);
  }
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu::ggml_detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph::cpu::ggml_detail {

HWY_EXPORT(DecodeQ4_0);
HWY_EXPORT(DecodeQ8_0);
HWY_EXPORT(DecodeQ5_0);
HWY_EXPORT(DecodeQ5_1);
HWY_EXPORT(DecodeMXFP4);

void decode_q4_0(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeQ4_0)(src, blocks, dst); }
void decode_q8_0(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeQ8_0)(src, blocks, dst); }
void decode_q5_0(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeQ5_0)(src, blocks, dst); }
void decode_q5_1(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeQ5_1)(src, blocks, dst); }
void decode_mxfp4(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeMXFP4)(src, blocks, dst); }

// Q4_1 (20 bytes): fp16 d, fp16 m, 16 bytes of nibbles. x = q * d + m.
void decode_q4_1(const uint8_t* src, uint64_t blocks, float* dst) {
  for_each_block<20, kQk>(src, blocks, dst, [](const uint8_t* b, float* y) {
    const float d = load_fp16(b);
    const float m = load_fp16(b + 2);
    const uint8_t* qs = b + 4;
    for (int j = 0; j < kQk / 2; ++j) {
      y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
      y[j + kQk / 2] = static_cast<float>(qs[j] >> 4) * d + m;
    }
  });
}

// Q8_1 (36 bytes): fp16 d, fp16 s (= d * sum of q; unused), 32 signed bytes. x = q * d, as Q8_0.
void decode_q8_1(const uint8_t* src, uint64_t blocks, float* dst) {
  for_each_block<36, kQk>(src, blocks, dst, [](const uint8_t* b, float* y) {
    const float d = load_fp16(b);
    const auto* qs = reinterpret_cast<const int8_t*>(b + 4);
    for (int j = 0; j < kQk; ++j) y[j] = static_cast<float>(qs[j]) * d;
  });
}

}  // namespace tmorph::cpu::ggml_detail
#endif  // HWY_ONCE
