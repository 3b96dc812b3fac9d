// ggml's "IQ" formats: lattice codebooks (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) and
// non-linear levels (IQ4_NL, IQ4_XS).
//
// Lattice formats store, per group of 8 (or 4) elements, an index into a grid of magnitudes
// (ggml_iq_grids.cpp) and sign bits; each 32-element sub-block has a small scale multiplying the
// super-block's fp16 d. Outputs are formed exactly as ggml forms them: (scale * grid value) * (+1 or -1)
// with the sign applied as a multiplication (as ggml does, so even a NaN scale behaves alike), or
// scale * (grid value + delta) for IQ1. Layout comments give byte offsets within the block.
//
// Every format here uses Highway (dynamic dispatch; this file is compiled once per target), so every
// target gives the same bits; the HWY_SCALAR target keeps the scalar block loops. IQ4_NL and IQ4_XS look
// their codes up in a 16-byte table of the int8 levels, widen them exactly and scale them as ggml does.
// The lattice formats take two points (16 elements) at a time: the two 8-byte grid rows (or four 4-byte
// ones) joined into 16 int8 lanes, and likewise two 8-byte rows of +1 / -1 for their sign bytes
// (kSignRows, or kCodeSignRows for a 7-bit sign code); both are widened exactly and ggml's
// (db * grid) * sign is taken lane by lane (ggml_simd-inl.h). IQ1 forms 8 * grid +- 1 in int8 lanes,
// which over 8 is exactly ggml's grid + delta.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "dequant/ggml_iquants.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <array>
#include <bit>
#include <cstdint>

#include "ggml_dequant.h"
#include "ggml_simd-inl.h"

#ifndef TM_GGML_IQUANTS_SHARED
#define TM_GGML_IQUANTS_SHARED
namespace tmorph::cpu::ggml_detail {
namespace {

constexpr int kQkK = 256;       // elements per super-block
constexpr int kQk4Nl = 32;      // elements per IQ4_NL block
constexpr float kIq1Delta = 0.125f;  // IQ1S_DELTA / IQ1M_DELTA

// +1 or -1 for sign bit `bit` of `signs` (set = negative).
inline float sign_factor(unsigned signs, int bit) {
  constexpr float kFactor[2] = {1.0f, -1.0f};
  return kFactor[(signs >> bit) & 1u];
}

// Writes the 8 elements of one grid point: (db * grid[j]) * sign_j, signs bit j set = negative.
template <class Row>
inline void signed_point8(float db, const Row& grid, unsigned signs, float* y) {
  for (int j = 0; j < 8; ++j) y[j] = db * static_cast<float>(grid[j]) * sign_factor(signs, j);
}

// Writes two 4-element grid points as 8 elements; signs bits 0-3 go with the first, 4-7 with the second.
template <class Row>
inline void signed_points4(float db, const Row& first, const Row& second, unsigned signs, float* y) {
  for (int j = 0; j < 4; ++j) {
    y[j] = db * static_cast<float>(first[j]) * sign_factor(signs, j);
    y[j + 4] = db * static_cast<float>(second[j]) * sign_factor(signs, j + 4);
  }
}

// The IQ2 sub-block scale: d * (0.5 + s) * 0.25, evaluated left to right as ggml does.
inline float iq2_scale(float d, unsigned s) { return d * (0.5f + static_cast<float>(s)) * 0.25f; }

// IQ1 point: dl * (grid[j] + delta).
inline void iq1_point(float dl, float delta, const std::array<int8_t, 8>& grid, float* y) {
  for (int j = 0; j < 8; ++j) y[j] = dl * (static_cast<float>(grid[j]) + delta);
}

// IQ4_XS: the 6-bit scale of sub-block ib (low 4 bits in scales_l @4, high 2 bits in scales_h) and its
// product dl = d * (s - 32), as ggml forms it.
inline float iq4_xs_sub_scale(const uint8_t* b, float d, unsigned scales_h, int ib) {
  const int ls = static_cast<int>(((b[4 + ib / 2] >> (4 * (ib % 2))) & 0x0Fu) | (((scales_h >> (2 * ib)) & 3u) << 4));
  return d * static_cast<float>(ls - 32);
}

// Scalar block decoders of the formats that also have Highway ones (used by the HWY_SCALAR target).

// IQ4_NL (18 bytes): fp16 d @0, 16 bytes of 4-bit level codes (element j low nibble, j + 16 high).
// x = d * level.
inline void iq4_nl_block(const uint8_t* b, float* y) {
  const float d = load_fp16(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kIq4nlValues[qs[j] & 0x0F]);
    y[j + 16] = d * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
  }
}

// IQ4_XS (136 bytes): fp16 d @0, uint16 scales_h @2 (2 high bits per sub-block), scales_l[4] @4 (4 low
// bits per sub-block), qs[128] @8 (16 bytes per sub-block, as IQ4_NL). x = (d * (s - 32)) * level.
inline void iq4_xs_block(const uint8_t* b, float* y) {
  const float d = load_fp16(b);
  const unsigned scales_h = load_u16(b + 2);
  for (int ib = 0; ib < 8; ++ib) {
    const float dl = iq4_xs_sub_scale(b, d, scales_h, ib);
    const uint8_t* qs = b + 8 + 16 * ib;
    float* out = y + 32 * ib;
    for (int j = 0; j < 16; ++j) {
      out[j] = dl * static_cast<float>(kIq4nlValues[qs[j] & 0x0F]);
      out[j + 16] = dl * static_cast<float>(kIq4nlValues[qs[j] >> 4]);
    }
  }
}

// 8 int8 lanes of +1 / -1 per sign byte (bit j set = element j negative): the SIMD decoders' sign rows.
using SignRow = std::array<int8_t, 8>;
constexpr std::array<SignRow, 256> make_sign_rows() {
  std::array<SignRow, 256> rows{};
  for (unsigned bits = 0; bits < 256; ++bits)
    for (unsigned j = 0; j < 8; ++j) rows[bits][j] = static_cast<int8_t>((bits >> j) & 1u ? -1 : 1);
  return rows;
}
alignas(64) constexpr std::array<SignRow, 256> kSignRows = make_sign_rows();

// The sign row of each 7-bit sign code, i.e. of kIq2Signs[code]: the 7 bits and their parity as bit 7.
constexpr std::array<SignRow, 128> make_code_sign_rows() {
  std::array<SignRow, 128> rows{};
  for (unsigned code = 0; code < 128; ++code) rows[code] = kSignRows[code | ((std::popcount(code) & 1u) << 7)];
  return rows;
}
alignas(64) constexpr std::array<SignRow, 128> kCodeSignRows = make_code_sign_rows();

// IQ1_M: the delta signs of a point pair as 16 int8 lanes (+1 / -1), by (first negative) | 2 * (second).
constexpr std::array<std::array<int8_t, 16>, 4> make_iq1_delta_rows() {
  std::array<std::array<int8_t, 16>, 4> rows{};
  for (unsigned k = 0; k < 4; ++k)
    for (unsigned j = 0; j < 16; ++j) rows[k][j] = static_cast<int8_t>((k >> (j / 8)) & 1u ? -1 : 1);
  return rows;
}
alignas(64) constexpr std::array<std::array<int8_t, 16>, 4> kIq1DeltaRows = make_iq1_delta_rows();

// The IQ3_XXS sub-block scale: d * (0.5 + s) * 0.5, left to right.
inline float iq3_xxs_scale(float d, unsigned s) { return d * (0.5f + static_cast<float>(s)) * 0.5f; }

// The IQ1 sub-block scale d * (2s + 1) of a 3-bit s.
inline float iq1_scale(float d, unsigned s) { return d * static_cast<float>(2 * s + 1); }

// IQ1_M: the fp16 d spread over the top nibbles of the four scale words.
inline float iq1_m_d(const unsigned (&sc)[4]) {
  const auto d_bits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0u) | ((sc[2] >> 4) & 0x0f00u) |
                                            (sc[3] & 0xf000u));
  return fp16_to_f32(d_bits);
}

// Scalar lattice block decoders (used by the HWY_SCALAR target); the layouts are described at the
// dispatching decode_* functions below.

inline void iq2_xxs_block(const uint8_t* b, float* y) {
  const float d = load_fp16(b);
  for (int ib = 0; ib < 8; ++ib) {
    const uint8_t* sub = b + 2 + 8 * ib;
    const uint32_t word = load_u32(sub + 4);
    const float db = iq2_scale(d, word >> 28);
    for (int l = 0; l < 4; ++l)
      signed_point8(db, kIq2xxsGrid[sub[l]], kIq2Signs[(word >> (7 * l)) & 127], y + 32 * ib + 8 * l);
  }
}

inline void iq2_xs_block(const uint8_t* b, float* y) {
  const float d = load_fp16(b);
  for (int ib = 0; ib < 8; ++ib) {
    const float db[2] = {iq2_scale(d, b[66 + ib] & 0x0Fu), iq2_scale(d, b[66 + ib] >> 4)};
    for (int l = 0; l < 4; ++l) {
      const uint16_t q = load_u16(b + 2 + 2 * (4 * ib + l));
      signed_point8(db[l / 2], kIq2xsGrid[q & 511], kIq2Signs[q >> 9], y + 32 * ib + 8 * l);
    }
  }
}

inline void iq2_s_block(const uint8_t* b, float* y) {
  const float d = load_fp16(b);
  for (int ib = 0; ib < 8; ++ib) {
    const float db[2] = {iq2_scale(d, b[74 + ib] & 0x0Fu), iq2_scale(d, b[74 + ib] >> 4)};
    const unsigned qh = b[66 + ib];
    for (int l = 0; l < 4; ++l) {
      const unsigned index = b[2 + 4 * ib + l] | ((qh << (8 - 2 * l)) & 0x300u);
      signed_point8(db[l / 2], kIq2sGrid[index], b[34 + 4 * ib + l], y + 32 * ib + 8 * l);
    }
  }
}

inline void iq3_xxs_block(const uint8_t* b, float* y) {
  const float d = load_fp16(b);
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t word = load_u32(b + 66 + 4 * ib);
    const float db = iq3_xxs_scale(d, word >> 28);
    const uint8_t* qs = b + 2 + 8 * ib;
    for (int l = 0; l < 4; ++l)
      signed_points4(db, kIq3xxsGrid[qs[2 * l]], kIq3xxsGrid[qs[2 * l + 1]], kIq2Signs[(word >> (7 * l)) & 127],
                     y + 32 * ib + 8 * l);
  }
}

inline void iq3_s_block(const uint8_t* b, float* y) {
  const float d = load_fp16(b);
  for (int ib = 0; ib < 8; ++ib) {
    const unsigned s = (b[106 + ib / 2] >> (4 * (ib % 2))) & 0x0Fu;
    const float db = d * static_cast<float>(1 + 2 * s);
    const unsigned qh = b[66 + ib];
    const uint8_t* qs = b + 2 + 8 * ib;
    for (int l = 0; l < 4; ++l) {
      const unsigned first = qs[2 * l] | ((qh << (8 - 2 * l)) & 256u);
      const unsigned second = qs[2 * l + 1] | ((qh << (7 - 2 * l)) & 256u);
      signed_points4(db, kIq3sGrid[first], kIq3sGrid[second], b[74 + 4 * ib + l], y + 32 * ib + 8 * l);
    }
  }
}

inline void iq1_s_block(const uint8_t* b, float* y) {
  const float d = load_fp16(b);
  for (int ib = 0; ib < 8; ++ib) {
    const unsigned qh = load_u16(b + 34 + 2 * ib);
    const float dl = iq1_scale(d, (qh >> 12) & 7);
    const float delta = (qh & 0x8000u) ? -kIq1Delta : kIq1Delta;
    for (int l = 0; l < 4; ++l) {
      const unsigned index = b[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7u) << 8);
      iq1_point(dl, delta, kIq1sGrid[index], y + 32 * ib + 8 * l);
    }
  }
}

inline void iq1_m_block(const uint8_t* b, float* y) {
  unsigned sc[4];
  for (int k = 0; k < 4; ++k) sc[k] = load_u16(b + 48 + 2 * k);
  const float d = iq1_m_d(sc);
  for (int ib = 0; ib < 8; ++ib) {
    const unsigned word = sc[ib / 2], shift = 6 * (ib % 2);
    const float dl[2] = {iq1_scale(d, (word >> shift) & 7), iq1_scale(d, (word >> (shift + 3)) & 7)};
    for (int l = 0; l < 4; ++l) {
      const unsigned nibble = (b[32 + 2 * ib + l / 2] >> (4 * (l % 2))) & 0x0Fu;
      const unsigned index = b[4 * ib + l] | ((nibble & 7u) << 8);
      const float delta = (nibble & 8u) ? -kIq1Delta : kIq1Delta;
      iq1_point(dl[l / 2], delta, kIq1sGrid[index], y + 32 * ib + 8 * l);
    }
  }
}

}  // namespace
}  // namespace tmorph::cpu::ggml_detail
#endif  // TM_GGML_IQUANTS_SHARED

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu::ggml_detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// IQ4_NL (18 bytes): fp16 d @0, qs[16] @2. x = d * level.
void DecodeIQ4_NL(const uint8_t* src, uint64_t blocks, float* dst) {
#if HWY_TARGET == HWY_SCALAR
  for_each_block<18, kQk4Nl>(src, blocks, dst, iq4_nl_block);
#else
  const auto table = hn::LoadU(GroupBytes(), kIq4nlValues.data());
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 18;
    DecodeCodebookGroup(table, b + 2, ScaleTimes{load_fp16(b)}, dst + i * kQk4Nl);
  }
#endif
}

// IQ4_XS (136 bytes): fp16 d @0, scales_h @2, scales_l[4] @4, qs[128] @8. x = (d * (s - 32)) * level.
void DecodeIQ4_XS(const uint8_t* src, uint64_t blocks, float* dst) {
#if HWY_TARGET == HWY_SCALAR
  for_each_block<136, kQkK>(src, blocks, dst, iq4_xs_block);
#else
  const auto table = hn::LoadU(GroupBytes(), kIq4nlValues.data());
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 136;
    const float d = load_fp16(b);
    const unsigned scales_h = load_u16(b + 2);
    for (int ib = 0; ib < 8; ++ib)
      DecodeCodebookGroup(table, b + 8 + 16 * ib, ScaleTimes{iq4_xs_sub_scale(b, d, scales_h, ib)},
                          dst + i * kQkK + 32 * ib);
  }
#endif
}

// The lattice decoders below read the block in place (byte loads and memcpy loads, any alignment) and
// write two points (16 elements) per step.

// IQ2_XXS (66 bytes): fp16 d @0, 8 sub-blocks of 8 bytes @2: 4 grid indices, a 32-bit word of sign codes
// and scale.
void DecodeIQ2_XXS(const uint8_t* src, uint64_t blocks, float* dst) {
#if HWY_TARGET == HWY_SCALAR
  for_each_block<66, kQkK>(src, blocks, dst, iq2_xxs_block);
#else
  const GroupBytes d8;
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 66;
    float* y = dst + i * kQkK;
    const float d = load_fp16(b);
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* sub = b + 2 + 8 * ib;
      const uint32_t word = load_u32(sub + 4);
      const float db = iq2_scale(d, word >> 28);
      for (int p = 0; p < 2; ++p) {
        const auto level = JoinPoints(LoadPoint8(kIq2xxsGrid[sub[2 * p]].data()),
                                      LoadPoint8(kIq2xxsGrid[sub[2 * p + 1]].data()));
        const auto sign = JoinPoints(LoadPoint8(kCodeSignRows[(word >> (14 * p)) & 127].data()),
                                     LoadPoint8(kCodeSignRows[(word >> (14 * p + 7)) & 127].data()));
        StoreSignedScaled(d8, level, sign, db, y + 32 * ib + 16 * p);
      }
    }
  }
#endif
}

// IQ2_XS (74 bytes): fp16 d @0, 32 uint16 @2 (9-bit grid index, 7-bit sign code), scales[8] @66.
void DecodeIQ2_XS(const uint8_t* src, uint64_t blocks, float* dst) {
#if HWY_TARGET == HWY_SCALAR
  for_each_block<74, kQkK>(src, blocks, dst, iq2_xs_block);
#else
  const GroupBytes d8;
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 74;
    float* y = dst + i * kQkK;
    const float d = load_fp16(b);
    for (int ib = 0; ib < 8; ++ib) {
      const float db[2] = {iq2_scale(d, b[66 + ib] & 0x0Fu), iq2_scale(d, b[66 + ib] >> 4)};
      for (int p = 0; p < 2; ++p) {
        const uint32_t q = load_u32(b + 2 + 2 * (4 * ib + 2 * p));  // the pair's two uint16
        const auto level = JoinPoints(LoadPoint8(kIq2xsGrid[q & 511].data()),
                                      LoadPoint8(kIq2xsGrid[(q >> 16) & 511].data()));
        const auto sign = JoinPoints(LoadPoint8(kCodeSignRows[(q >> 9) & 127].data()),
                                     LoadPoint8(kCodeSignRows[q >> 25].data()));
        StoreSignedScaled(d8, level, sign, db[p], y + 32 * ib + 16 * p);
      }
    }
  }
#endif
}

// IQ2_S (82 bytes): fp16 d @0, index low bytes[32] @2, sign bytes[32] @34, qh[8] @66, scales[8] @74.
void DecodeIQ2_S(const uint8_t* src, uint64_t blocks, float* dst) {
#if HWY_TARGET == HWY_SCALAR
  for_each_block<82, kQkK>(src, blocks, dst, iq2_s_block);
#else
  const GroupBytes d8;
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 82;
    float* y = dst + i * kQkK;
    const float d = load_fp16(b);
    for (int ib = 0; ib < 8; ++ib) {
      const float db[2] = {iq2_scale(d, b[74 + ib] & 0x0Fu), iq2_scale(d, b[74 + ib] >> 4)};
      const unsigned qh = b[66 + ib];
      for (int p = 0; p < 2; ++p) {
        const int l = 2 * p;
        const unsigned first = b[2 + 4 * ib + l] | ((qh << (8 - 2 * l)) & 0x300u);
        const unsigned second = b[3 + 4 * ib + l] | ((qh << (6 - 2 * l)) & 0x300u);
        const auto level = JoinPoints(LoadPoint8(kIq2sGrid[first].data()), LoadPoint8(kIq2sGrid[second].data()));
        const auto sign = JoinPoints(LoadPoint8(kSignRows[b[34 + 4 * ib + l]].data()),
                                     LoadPoint8(kSignRows[b[35 + 4 * ib + l]].data()));
        StoreSignedScaled(d8, level, sign, db[p], y + 32 * ib + 16 * p);
      }
    }
  }
#endif
}

// IQ3_XXS (98 bytes): fp16 d @0, grid indices[64] @2, 8 32-bit words of sign codes and scale @66.
void DecodeIQ3_XXS(const uint8_t* src, uint64_t blocks, float* dst) {
#if HWY_TARGET == HWY_SCALAR
  for_each_block<98, kQkK>(src, blocks, dst, iq3_xxs_block);
#else
  const GroupBytes d8;
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 98;
    float* y = dst + i * kQkK;
    const float d = load_fp16(b);
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t word = load_u32(b + 66 + 4 * ib);
      const float db = iq3_xxs_scale(d, word >> 28);
      const uint8_t* qs = b + 2 + 8 * ib;
      for (int p = 0; p < 2; ++p) {
        const uint8_t* q = qs + 4 * p;
        const auto level = JoinPoints(LoadPoints4(kIq3xxsGrid[q[0]].data(), kIq3xxsGrid[q[1]].data()),
                                      LoadPoints4(kIq3xxsGrid[q[2]].data(), kIq3xxsGrid[q[3]].data()));
        const auto sign = JoinPoints(LoadPoint8(kCodeSignRows[(word >> (14 * p)) & 127].data()),
                                     LoadPoint8(kCodeSignRows[(word >> (14 * p + 7)) & 127].data()));
        StoreSignedScaled(d8, level, sign, db, y + 32 * ib + 16 * p);
      }
    }
  }
#endif
}

// IQ3_S (110 bytes): fp16 d @0, index low bytes[64] @2, qh[8] @66, sign bytes[32] @74, scales[4] @106.
void DecodeIQ3_S(const uint8_t* src, uint64_t blocks, float* dst) {
#if HWY_TARGET == HWY_SCALAR
  for_each_block<110, kQkK>(src, blocks, dst, iq3_s_block);
#else
  const GroupBytes d8;
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 110;
    float* y = dst + i * kQkK;
    const float d = load_fp16(b);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned s = (b[106 + ib / 2] >> (4 * (ib % 2))) & 0x0Fu;
      const float db = d * static_cast<float>(1 + 2 * s);
      const unsigned qh = b[66 + ib];
      const uint8_t* qs = b + 2 + 8 * ib;
      for (int p = 0; p < 2; ++p) {
        const unsigned h = qh >> (4 * p);  // the 9th bits of the pair's four 4-element points
        const uint8_t* q = qs + 4 * p;
        const auto level = JoinPoints(
            LoadPoints4(kIq3sGrid[q[0] | ((h << 8) & 256u)].data(), kIq3sGrid[q[1] | ((h << 7) & 256u)].data()),
            LoadPoints4(kIq3sGrid[q[2] | ((h << 6) & 256u)].data(), kIq3sGrid[q[3] | ((h << 5) & 256u)].data()));
        const auto sign = JoinPoints(LoadPoint8(kSignRows[b[74 + 4 * ib + 2 * p]].data()),
                                     LoadPoint8(kSignRows[b[75 + 4 * ib + 2 * p]].data()));
        StoreSignedScaled(d8, level, sign, db, y + 32 * ib + 16 * p);
      }
    }
  }
#endif
}

// IQ1_S (50 bytes): fp16 d @0, index low bytes[32] @2, 8 uint16 @34 (high index bits, scale, delta sign).
void DecodeIQ1_S(const uint8_t* src, uint64_t blocks, float* dst) {
#if HWY_TARGET == HWY_SCALAR
  for_each_block<50, kQkK>(src, blocks, dst, iq1_s_block);
#else
  const GroupBytes d8;
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 50;
    float* y = dst + i * kQkK;
    const float d = load_fp16(b);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned qh = load_u16(b + 34 + 2 * ib);
      const ScaleTimesEighths scale{iq1_scale(d, (qh >> 12) & 7)};
      const auto delta_sign = hn::Set(d8, static_cast<int8_t>((qh & 0x8000u) ? -1 : 1));
      const uint8_t* qs = b + 2 + 4 * ib;
      for (int p = 0; p < 2; ++p) {
        const int l = 2 * p;
        const auto grid = JoinPoints(LoadPoint8(kIq1sGrid[qs[l] | (((qh >> (3 * l)) & 7u) << 8)].data()),
                                     LoadPoint8(kIq1sGrid[qs[l + 1] | (((qh >> (3 * l + 3)) & 7u) << 8)].data()));
        StoreScaled(d8, Iq1Eighths(grid, delta_sign), scale, y + 32 * ib + 16 * p);
      }
    }
  }
#endif
}

// IQ1_M (56 bytes): index low bytes[32] @0, qh[16] @32 (high index bits and delta sign per nibble),
// scales[8] @48 (3-bit scales and the spread fp16 d).
void DecodeIQ1_M(const uint8_t* src, uint64_t blocks, float* dst) {
#if HWY_TARGET == HWY_SCALAR
  for_each_block<56, kQkK>(src, blocks, dst, iq1_m_block);
#else
  const GroupBytes d8;
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * 56;
    float* y = dst + i * kQkK;
    unsigned sc[4];
    for (int k = 0; k < 4; ++k) sc[k] = load_u16(b + 48 + 2 * k);
    const float d = iq1_m_d(sc);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned word = sc[ib / 2], shift = 6 * (ib % 2);
      for (int p = 0; p < 2; ++p) {
        const ScaleTimesEighths scale{iq1_scale(d, (word >> (shift + 3 * p)) & 7)};
        const unsigned h = b[32 + 2 * ib + p];  // low nibble: point 2p, high nibble: point 2p + 1
        const auto grid = JoinPoints(LoadPoint8(kIq1sGrid[b[4 * ib + 2 * p] | ((h & 7u) << 8)].data()),
                                     LoadPoint8(kIq1sGrid[b[4 * ib + 2 * p + 1] | (((h >> 4) & 7u) << 8)].data()));
        const auto delta_sign = hn::LoadU(d8, kIq1DeltaRows[((h >> 3) & 1u) | ((h >> 6) & 2u)].data());
        StoreScaled(d8, Iq1Eighths(grid, delta_sign), scale, y + 32 * ib + 16 * p);
      }
    }
  }
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu::ggml_detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph::cpu::ggml_detail {

HWY_EXPORT(DecodeIQ4_NL);
HWY_EXPORT(DecodeIQ4_XS);

void decode_iq4_nl(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeIQ4_NL)(src, blocks, dst); }
void decode_iq4_xs(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeIQ4_XS)(src, blocks, dst); }

HWY_EXPORT(DecodeIQ2_XXS);
HWY_EXPORT(DecodeIQ2_XS);
HWY_EXPORT(DecodeIQ2_S);
HWY_EXPORT(DecodeIQ3_XXS);
HWY_EXPORT(DecodeIQ3_S);
HWY_EXPORT(DecodeIQ1_S);
HWY_EXPORT(DecodeIQ1_M);

// IQ2_XXS (66 bytes): fp16 d @0, then 8 sub-blocks of 8 bytes @2: 4 grid indices (bytes), then a
// 32-bit word with four 7-bit sign codes (bits 7l..7l+6) and the 4-bit scale (bits 28-31).
// x = (db * grid) * sign, db = d * (0.5 + s) * 0.25.
void decode_iq2_xxs(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeIQ2_XXS)(src, blocks, dst); }

// IQ2_XS (74 bytes): fp16 d @0, 32 uint16 @2 (9-bit grid index, 7-bit sign code), scales[8] @66 (two
// 4-bit scales per sub-block: low nibble for points 0-1, high for points 2-3).
void decode_iq2_xs(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeIQ2_XS)(src, blocks, dst); }

// IQ2_S (82 bytes): fp16 d @0, grid index low bytes[32] @2, explicit sign bytes[32] @34, qh[8] @66 (2
// high index bits per point), scales[8] @74 (as IQ2_XS).
void decode_iq2_s(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeIQ2_S)(src, blocks, dst); }

// IQ3_XXS (98 bytes): fp16 d @0, grid indices[64] @2 (two 4-element points per group of 8), then 8
// 32-bit words @66 (four 7-bit sign codes and a 4-bit scale, as IQ2_XXS). db = d * (0.5 + s) * 0.5.
void decode_iq3_xxs(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeIQ3_XXS)(src, blocks, dst); }

// IQ3_S (110 bytes): fp16 d @0, grid index low bytes[64] @2, qh[8] @66 (9th index bit, one byte per
// sub-block, bit k for point k), sign bytes[32] @74, scales[4] @106 (4 bits per sub-block).
// db = d * (1 + 2 * s).
void decode_iq3_s(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeIQ3_S)(src, blocks, dst); }

// IQ1_S (50 bytes): fp16 d @0, grid index low bytes[32] @2, 8 uint16 @34: per sub-block, 3 high index
// bits per point (bits 3l..3l+2), a 3-bit scale (bits 12-14) and the delta sign (bit 15).
// x = (d * (2s + 1)) * (grid + delta), delta = +-0.125.
void decode_iq1_s(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeIQ1_S)(src, blocks, dst); }

// IQ1_M (56 bytes): grid index low bytes[32] @0, qh[16] @32 (per point pair: 3 high index bits and a
// delta sign bit per nibble), scales[8] @48 as 4 uint16: twelve 3-bit scales (two per sub-block: points
// 0-1 and 2-3) in bits 0-11, and the fp16 d spread over their top nibbles (word k holds bits 4k..4k+3).
void decode_iq1_m(const uint8_t* src, uint64_t blocks, float* dst) { HWY_DYNAMIC_DISPATCH(DecodeIQ1_M)(src, blocks, dst); }

}  // namespace tmorph::cpu::ggml_detail
#endif  // HWY_ONCE
