// ggml's 256-element super-block formats: the K-quants (Q2_K .. Q6_K, Q8_K) and the ternary TQ1_0/TQ2_0.
//
// A super-block carries fp16 scales (Q8_K: one float32) and packed sub-block scales. The sub-block
// scale products (d * scale, dmin * min) are formed once per sub-block, as ggml forms them; element
// order and float operation order follow ggml's dequantize_row_* exactly. The layout comments give byte
// offsets within the block.
//
// The hot formats Q4_K and Q6_K use Highway (dynamic dispatch; this file is compiled once per target),
// with the same operations lane by lane, so every target gives the same bits. The others are plain
// loops, branch-free over the elements.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "dequant/ggml_kquants.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>

#include "ggml_dequant.h"

#ifndef TM_GGML_KQUANTS_SHARED
#define TM_GGML_KQUANTS_SHARED
namespace tmorph::cpu::ggml_detail {

// Q4_K/Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes: sub-blocks 0-3 keep
// them in the low 6 bits of bytes j and j+4; sub-blocks 4-7 keep their low 4 bits in byte j+4 and their
// top 2 bits in the top bits of bytes j-4 (scale) and j (min).
struct ScaleMin {
  int scale, min;
};
inline ScaleMin k4_scale_min(const uint8_t* packed, int j) {
  if (j < 4) return {packed[j] & 63, packed[j + 4] & 63};
  return {(packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4), (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4)};
}

}  // namespace tmorph::cpu::ggml_detail
#endif  // TM_GGML_KQUANTS_SHARED

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu::ggml_detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Q4_K (144 bytes): fp16 d @0, dmin @2, scales[12] @4, qs[128] @16. Chunk c (64 elements) reads bytes
// 32c .. 32c+31: low nibbles are sub-block 2c, high nibbles sub-block 2c+1.
// x = (d * scale) * q - (dmin * min).
void DecodeQ4_K(const uint8_t* src, uint64_t blocks, float* dst) {
  const hn::CappedTag<float, 32> df;  // at most 32 lanes: a sub-block is a whole number of vectors
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> d8;
  const size_t n = hn::Lanes(df);
  const auto low_mask = hn::Set(di, 0x0F);
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 144;
    const float d = load_fp16(b);
    const float dmin = load_fp16(b + 2);
    for (int c = 0; c < 4; ++c) {
      const ScaleMin lo = k4_scale_min(b + 4, 2 * c), hi = k4_scale_min(b + 4, 2 * c + 1);
      const auto d1 = hn::Set(df, d * static_cast<float>(lo.scale)), m1 = hn::Set(df, dmin * static_cast<float>(lo.min));
      const auto d2 = hn::Set(df, d * static_cast<float>(hi.scale)), m2 = hn::Set(df, dmin * static_cast<float>(hi.min));
      const uint8_t* q = b + 16 + 32 * c;
      float* out = dst + i * 256 + 64 * c;
      for (size_t l = 0; l < 32; l += n) {
        const auto bytes = hn::PromoteTo(di, hn::LoadU(d8, q + l));
        const auto low = hn::ConvertTo(df, hn::And(bytes, low_mask));
        const auto high = hn::ConvertTo(df, hn::ShiftRight<4>(bytes));
        hn::StoreU(hn::Sub(hn::Mul(d1, low), m1), df, out + l);
        hn::StoreU(hn::Sub(hn::Mul(d2, high), m2), df, out + 32 + l);
      }
    }
  }
}

// Q6_K (210 bytes): ql[128] @0, qh[64] @128, int8 scales[16] @192, fp16 d @208. In half h (128
// elements) element 32*k + l (k < 4, l < 32) has its low nibble in ql[64h + l + 32*(k%2)] (low nibble
// for k < 2, high for k >= 2) and its top 2 bits at bits 2k of qh[32h + l]; its scale is
// scales[8h + 2k + l/16]. x = (d * scale) * (q - 32).
void DecodeQ6_K(const uint8_t* src, uint64_t blocks, float* dst) {
  const hn::CappedTag<float, 16> df;  // at most 16 lanes: 16 consecutive elements share a scale
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> d8;
  const size_t n = hn::Lanes(df);
  const auto low_mask = hn::Set(di, 0x0F), two_bits = hn::Set(di, 3), bias = hn::Set(di, 32);
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 210;
    const float d = load_fp16(b + 208);
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* qh = b + 128 + 32 * h;
      float* out = dst + i * 256 + 128 * h;
      for (int k = 0; k < 4; ++k) {
        const uint8_t* low = b + 64 * h + 32 * (k % 2);
        const int nibble_shift = 4 * (k / 2);
        for (size_t part = 0; part < 2; ++part) {
          const auto scale = hn::Set(df, d * static_cast<float>(scales[8 * h + 2 * k + part]));
          for (size_t l = 16 * part; l < 16 * part + 16; l += n) {
            const auto lo4 = hn::And(hn::ShiftRightSame(hn::PromoteTo(di, hn::LoadU(d8, low + l)), nibble_shift), low_mask);
            const auto hi2 = hn::And(hn::ShiftRightSame(hn::PromoteTo(di, hn::LoadU(d8, qh + l)), 2 * k), two_bits);
            const auto q = hn::Sub(hn::Or(lo4, hn::ShiftLeft<4>(hi2)), bias);
            hn::StoreU(hn::Mul(scale, hn::ConvertTo(df, q)), df, out + 32 * k + l);
          }
        }
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu::ggml_detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph::cpu::ggml_detail {
namespace {

constexpr int kQkK = 256;  // elements per super-block

// Q3_K: the 16 signed 6-bit scales (-32 .. 31) from the 12 packed bytes: the low 4 bits of scale i are
// the low (i < 8) or high (i >= 8) nibble of byte i % 8, its top 2 bits are bits 2*(i/4) of byte 8 + i % 4.
inline int q3k_scale(const uint8_t* packed, int i) {
  const int low = i < 8 ? (packed[i] & 0x0F) : (packed[i - 8] >> 4);
  const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Q2_K/Q3_K element order: two halves of 128 elements, each reading 32 bytes of 2-bit quants four times
// (shift 0, 2, 4, 6); each pass writes 16 elements from bytes 0-15 (sub-block 2*pass) and then 16 from
// bytes 16-31 (sub-block 2*pass + 1). Sub-block s of the super-block covers elements 16*s .. 16*s + 15.
inline int two_bit(const uint8_t* q, int byte, int shift) { return (q[byte] >> shift) & 3; }

}  // namespace

HWY_EXPORT(DecodeQ4_K);
HWY_EXPORT(DecodeQ6_K);

void decode_q4_k(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeQ4_K)(src, blocks, dst); }
void decode_q6_k(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeQ6_K)(src, blocks, dst); }

// Q2_K (84 bytes): scales[16] @0 (low nibble scale, high nibble min), qs[64] @16, fp16 d @80, dmin @82.
// x = (d * scale) * q - (dmin * min).
void decode_q2_k(const uint8_t* src, uint64_t blocks, float* dst) {
  for_each_block<84, kQkK>(src, blocks, dst, [](const uint8_t* b, float* y) {
    const uint8_t* scales = b;
    const float d = load_fp16(b + 80);
    const float dmin = load_fp16(b + 82);
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(scales[s] & 0x0F);
      const float ml = dmin * static_cast<float>(scales[s] >> 4);
      const uint8_t* q = b + 16 + 32 * (s / 8) + 16 * (s % 2);
      const int shift = 2 * ((s % 8) / 2);
      for (int l = 0; l < 16; ++l) y[16 * s + l] = dl * static_cast<float>(two_bit(q, l, shift)) - ml;
    }
  });
}

// Q3_K (110 bytes): hmask[32] @0, qs[64] @32, scales[12] @96, fp16 d @108. The 3rd bit of element
// 32*k + l (k < 8) is bit k of hmask[l]; a clear bit subtracts 4. x = (d * scale) * (q - 4 * !hbit).
void decode_q3_k(const uint8_t* src, uint64_t blocks, float* dst) {
  for_each_block<110, kQkK>(src, blocks, dst, [](const uint8_t* b, float* y) {
    const uint8_t* hmask = b;
    const float d = load_fp16(b + 108);
    for (int s = 0; s < 16; ++s) {
      const float dl = d * static_cast<float>(q3k_scale(b + 96, s));
      const int half = s / 8, pass = (s % 8) / 2, part = s % 2;
      const uint8_t* q = b + 32 + 32 * half;
      const int hbit = 4 * half + pass;  // bit of hmask for this pass
      for (int l = 0; l < 16; ++l) {
        const int at = 16 * part + l;
        const int low = two_bit(q, at, 2 * pass);
        const int minus = (((hmask[at] >> hbit) & 1) ^ 1) << 2;
        y[16 * s + l] = dl * static_cast<float>(low - minus);
      }
    }
  });
}

// Q5_K (176 bytes): fp16 d @0, dmin @2, scales[12] @4, qh[32] @16, qs[128] @48. As Q4_K, plus a 5th
// bit: element 32*k + l (k < 8) has it in bit k of qh[l]. x = (d * scale) * q - (dmin * min).
void decode_q5_k(const uint8_t* src, uint64_t blocks, float* dst) {
  for_each_block<176, kQkK>(src, blocks, dst, [](const uint8_t* b, float* y) {
    const float d = load_fp16(b);
    const float dmin = load_fp16(b + 2);
    const uint8_t* qh = b + 16;
    for (int c = 0; c < 4; ++c) {
      const ScaleMin lo = k4_scale_min(b + 4, 2 * c), hi = k4_scale_min(b + 4, 2 * c + 1);
      const float d1 = d * static_cast<float>(lo.scale), m1 = dmin * static_cast<float>(lo.min);
      const float d2 = d * static_cast<float>(hi.scale), m2 = dmin * static_cast<float>(hi.min);
      const uint8_t* ql = b + 48 + 32 * c;
      float* out = y + 64 * c;
      for (int l = 0; l < 32; ++l)
        out[l] = d1 * static_cast<float>((ql[l] & 0x0F) | (((qh[l] >> (2 * c)) & 1) << 4)) - m1;
      for (int l = 0; l < 32; ++l)
        out[32 + l] = d2 * static_cast<float>((ql[l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4)) - m2;
    }
  });
}

// Q8_K (292 bytes): float32 d @0, int8 qs[256] @4, int16 bsums[16] @260 (unused). x = d * q.
void decode_q8_k(const uint8_t* src, uint64_t blocks, float* dst) {
  for_each_block<292, kQkK>(src, blocks, dst, [](const uint8_t* b, float* y) {
    const float d = bits_to_f32(load_u32(b));
    const auto* qs = reinterpret_cast<const int8_t*>(b + 4);
    for (int j = 0; j < kQkK; ++j) y[j] = d * static_cast<float>(qs[j]);
  });
}

namespace {

// TQ1_0: a byte holds 5 trits as a base-3 fraction scaled to 0..255 (rounded up); trit n (most
// significant first) is recovered by multiplying by 3^n modulo 256 and taking the top of 3 * that.
// Writes `count` elements (one per byte of `bytes`) for each of the `trits` positions, position-major.
inline void tq1_trits(const uint8_t* bytes, int count, int trits, float d, float*& y) {
  constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  for (int n = 0; n < trits; ++n)
    for (int m = 0; m < count; ++m) {
      const uint8_t q = static_cast<uint8_t>(bytes[m] * kPow3[n]);
      const int xi = (q * 3) >> 8;
      *y++ = static_cast<float>(xi - 1) * d;
    }
}

}  // namespace

// TQ1_0 (54 bytes): qs[48] @0 (5 trits per byte), qh[4] @48 (4 trits per byte), fp16 d @52.
// Elements: 5 x 32 from qs[0..31], 5 x 16 from qs[32..47], 4 x 4 from qh. x = (t - 1) * d.
void decode_tq1_0(const uint8_t* src, uint64_t blocks, float* dst) {
  for_each_block<54, kQkK>(src, blocks, dst, [](const uint8_t* b, float* y) {
    const float d = load_fp16(b + 52);
    tq1_trits(b, 32, 5, d, y);
    tq1_trits(b + 32, 16, 5, d, y);
    tq1_trits(b + 48, 4, 4, d, y);
  });
}

// TQ2_0 (66 bytes): qs[64] @0 (4 values of 2 bits per byte), fp16 d @64. Each 32-byte half yields
// 4 x 32 elements (shift 0, 2, 4, 6). x = (q - 1) * d.
void decode_tq2_0(const uint8_t* src, uint64_t blocks, float* dst) {
  for_each_block<66, kQkK>(src, blocks, dst, [](const uint8_t* b, float* y) {
    const float d = load_fp16(b + 64);
    for (int half = 0; half < 2; ++half)
      for (int pass = 0; pass < 4; ++pass)
        for (int m = 0; m < 32; ++m)
          y[128 * half + 32 * pass + m] = static_cast<float>(two_bit(b + 32 * half, m, 2 * pass) - 1) * d;
  });
}

}  // namespace tmorph::cpu::ggml_detail
#endif  // HWY_ONCE
