// What quantization did to a ggml block-format tensor, read from its blocks without dequantizing:
// each block's scale (and min, where the format has one) and how often each stored code occurs.
#pragma once

#include <cstdint>

namespace tmorph::cpu {

// How a format stores scales and codes; nullptr for a type id without a layout here.
struct GgmlBlockLayout {
  uint32_t type_id;
  uint32_t block_elements, block_bytes;
  // Super-block scale d: fp16 at scale_offset (or float32 for Q8_K, E8M0 for MXFP4); min likewise
  // when has_min. IQ1_M packs its scale into its sub-block scales: has_scale is false.
  bool has_scale;
  uint32_t scale_offset;
  bool has_min;
  uint32_t min_offset;
  // Codes: code_bits per element (0 when the format stores lattice indices rather than levels).
  uint32_t code_bits;
};
const GgmlBlockLayout* ggml_block_layout(uint32_t type_id);

// Whether ggml_block_stats counts this format's codes (levels stored directly: Q4_0, Q4_1, Q5_0, Q5_1,
// Q8_0, Q2_K, Q4_K, Q8_K, IQ4_NL, IQ4_XS, TQ2_0, MXFP4). Q3_K, Q5_K and Q6_K split their codes across
// bit planes whose pairing is not modelled here, and lattice formats store grid indices, not levels.
bool ggml_counts_codes(uint32_t type_id);

// For `blocks` blocks at src: scales[i] / mins[i] (when non-null and the format has them) get block
// i's scale and min as float32 (MXFP4: the OCP scale 2^(e - 127)); code_counts[c] (256 entries) is
// increased by the occurrences of code c, and *saturated by the codes at either end of the code range
// (0 and 2^code_bits - 1; Q8_0/Q8_K: the int8 codes -128, -127 and 127; MXFP4: +-6, codes 7 and 15).
void ggml_block_stats(const GgmlBlockLayout& layout, const uint8_t* src, uint64_t blocks, float* scales, float* mins,
                      uint64_t* code_counts, uint64_t* saturated);

}  // namespace tmorph::cpu
