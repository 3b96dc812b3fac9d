#include "dequant/ggml_block_stats.h"

#include "dequant/ggml_dequant.h"

namespace tmorph::cpu {

namespace {

using ggml_detail::load_fp16;
using ggml_detail::load_u32;

// Block layouts (ggml-common.h's block structs; bytes per field in the comments).
constexpr GgmlBlockLayout kLayouts[] = {
    // id  elems bytes  scale@  min@  bits
    {2, 32, 18, true, 0, false, 0, 4},      // Q4_0: d, qs[16]
    {3, 32, 20, true, 0, true, 2, 4},       // Q4_1: d, m, qs[16]
    {6, 32, 22, true, 0, false, 0, 5},      // Q5_0: d, qh[4], qs[16]
    {7, 32, 24, true, 0, true, 2, 5},       // Q5_1: d, m, qh[4], qs[16]
    {8, 32, 34, true, 0, false, 0, 8},      // Q8_0: d, qs[32] int8
    {10, 256, 84, true, 80, true, 82, 2},   // Q2_K: scales[16], qs[64], d, dmin
    {11, 256, 110, true, 108, false, 0, 3}, // Q3_K: hmask[32], qs[64], scales[12], d
    {12, 256, 144, true, 0, true, 2, 4},    // Q4_K: d, dmin, scales[12], qs[128]
    {13, 256, 176, true, 0, true, 2, 5},    // Q5_K: d, dmin, scales[12], qh[32], qs[128]
    {14, 256, 210, true, 208, false, 0, 6}, // Q6_K: ql[128], qh[64], scales[16], d
    {15, 256, 292, true, 0, false, 0, 8},   // Q8_K: d (float32), qs[256] int8, bsums[16]
    {16, 256, 66, true, 0, false, 0, 0},    // IQ2_XXS: d, qs[32] u16 (lattice indices)
    {17, 256, 74, true, 0, false, 0, 0},    // IQ2_XS
    {18, 256, 98, true, 0, false, 0, 0},    // IQ3_XXS
    {19, 256, 50, true, 0, false, 0, 0},    // IQ1_S
    {20, 32, 18, true, 0, false, 0, 4},     // IQ4_NL: d, qs[16] (indices of 16 non-linear levels)
    {21, 256, 110, true, 0, false, 0, 0},   // IQ3_S
    {22, 256, 82, true, 0, false, 0, 0},    // IQ2_S
    {23, 256, 136, true, 0, false, 0, 4},   // IQ4_XS: d, scales_h, scales_l[4], qs[128]
    {29, 256, 56, false, 0, false, 0, 0},   // IQ1_M: qs[32], qh[16], scales[8] (scale packed inside)
    {34, 256, 54, true, 52, false, 0, 0},   // TQ1_0: qs[48], qh[4] (base-3 packed), d
    {35, 256, 66, true, 64, false, 0, 2},   // TQ2_0: qs[64] (2-bit codes 0..2), d
    {39, 32, 17, true, 0, false, 0, 4},     // MXFP4: e (E8M0), qs[16] (E2M1 codes)
};

// Where a format's code bytes start and how many there are (for the formats whose codes are counted).
uint32_t codes_offset(uint32_t id) {
  switch (id) {
    case 2: return 2;    // Q4_0
    case 3: return 4;    // Q4_1
    case 6: return 6;    // Q5_0 (low nibbles; the 5th bits are in qh at 2)
    case 7: return 8;    // Q5_1 (qh at 4)
    case 8: return 2;    // Q8_0
    case 10: return 16;  // Q2_K
    case 12: return 16;  // Q4_K
    case 15: return 4;   // Q8_K
    case 20: return 2;   // IQ4_NL
    case 23: return 8;   // IQ4_XS
    case 35: return 0;   // TQ2_0
    case 39: return 1;   // MXFP4
    default: return 0;
  }
}

// Adds the codes of one block. Formats whose high bits pair with low bits through a layout this file
// does not model (Q3_K, Q5_K, Q6_K) report only their scales: code_bits is kept but nothing is counted.
void count_codes(const GgmlBlockLayout& l, const uint8_t* b, uint64_t* counts, uint64_t* saturated) {
  const uint32_t id = l.type_id, at = codes_offset(id);
  auto add = [&](uint32_t code, uint32_t top) {
    ++counts[code];
    // MXFP4's E2M1 codes are sign-magnitude: its extremes are +-6 (codes 7 and 15).
    if (id == 39 ? (code & 7u) == 7u : (code == 0 || code == top)) ++*saturated;
  };
  switch (id) {
    case 2: case 3: case 12: case 20: case 23: case 39: {  // nibbles
      const uint32_t n = (l.block_bytes - at);
      for (uint32_t i = 0; i < n; ++i) add(b[at + i] & 15u, 15), add(b[at + i] >> 4, 15);
      return;
    }
    case 6: case 7: {  // nibble plus the 5th bit: low nibble of byte j is element j, high is j + 16
      const uint32_t qh = load_u32(b + (id == 6 ? 2 : 4));
      for (uint32_t j = 0; j < 16; ++j) {
        add((b[at + j] & 15u) | (((qh >> j) & 1u) << 4), 31);
        add((b[at + j] >> 4) | (((qh >> (j + 16)) & 1u) << 4), 31);
      }
      return;
    }
    case 8: case 15: {  // int8 codes, counted at code + 128
      const uint32_t n = id == 8 ? 32 : 256;
      for (uint32_t i = 0; i < n; ++i) {
        const int8_t q = static_cast<int8_t>(b[at + i]);
        ++counts[static_cast<uint32_t>(q + 128)];
        if (q <= -127 || q == 127) ++*saturated;
      }
      return;
    }
    case 10: case 35: {  // 2-bit codes, four per byte
      for (uint32_t i = 0; i < 64; ++i)
        for (uint32_t s = 0; s < 8; s += 2) add((b[at + i] >> s) & 3u, id == 35 ? 2 : 3);
      return;
    }
    default:
      return;
  }
}

}  // namespace

bool ggml_counts_codes(uint32_t id) {
  switch (id) {
    case 2: case 3: case 6: case 7: case 8: case 10: case 12: case 15: case 20: case 23: case 35: case 39: return true;
    default: return false;
  }
}

namespace {

float scale_at(const GgmlBlockLayout& l, const uint8_t* b, uint32_t offset) {
  if (l.type_id == 15) return ggml_detail::bits_to_f32(load_u32(b + offset));    // Q8_K: float32
  if (l.type_id == 39) return 2.0f * ggml_detail::e8m0_half_to_f32(b[offset]);   // MXFP4: 2^(e - 127)
  return load_fp16(b + offset);
}

}  // namespace

const GgmlBlockLayout* ggml_block_layout(uint32_t type_id) {
  for (const auto& l : kLayouts)
    if (l.type_id == type_id) return &l;
  return nullptr;
}

void ggml_block_stats(const GgmlBlockLayout& l, const uint8_t* src, uint64_t blocks, float* scales, float* mins,
                      uint64_t* code_counts, uint64_t* saturated) {
  const bool codes = code_counts && saturated && ggml_counts_codes(l.type_id);
  for (uint64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = src + i * l.block_bytes;
    if (scales && l.has_scale) scales[i] = scale_at(l, b, l.scale_offset);
    if (mins && l.has_min) mins[i] = load_fp16(b + l.min_offset);
    if (codes) count_codes(l, b, code_counts, saturated);
  }
}

}  // namespace tmorph::cpu
