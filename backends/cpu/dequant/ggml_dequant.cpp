// The table of dequantizable ggml block formats and the dispatch to their decoders.
#include "ggml_dequant.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace tmorph::cpu {

static_assert(std::endian::native == std::endian::little, "the ggml decoders read little-endian fields natively");

namespace {

using ggml_detail::BlockDecoder;

struct FormatEntry {
  GgmlBlockFormat format;
  BlockDecoder decode;
};

// Every quantized type that src/formats/gguf.cpp's kGgmlTypes knows, with ggml's block geometry.
// Q8_1 has no dequantize_row_* in ggml (it is a dot-product operand); it decodes as qs[i] * d like Q8_0,
// and its second fp16 field (d * sum of qs) is not used.
constexpr FormatEntry kFormats[] = {
    {{2, "Q4_0", 32, 18}, ggml_detail::decode_q4_0},
    {{3, "Q4_1", 32, 20}, ggml_detail::decode_q4_1},
    {{6, "Q5_0", 32, 22}, ggml_detail::decode_q5_0},
    {{7, "Q5_1", 32, 24}, ggml_detail::decode_q5_1},
    {{8, "Q8_0", 32, 34}, ggml_detail::decode_q8_0},
    {{9, "Q8_1", 32, 36}, ggml_detail::decode_q8_1},
    {{10, "Q2_K", 256, 84}, ggml_detail::decode_q2_k},
    {{11, "Q3_K", 256, 110}, ggml_detail::decode_q3_k},
    {{12, "Q4_K", 256, 144}, ggml_detail::decode_q4_k},
    {{13, "Q5_K", 256, 176}, ggml_detail::decode_q5_k},
    {{14, "Q6_K", 256, 210}, ggml_detail::decode_q6_k},
    {{15, "Q8_K", 256, 292}, ggml_detail::decode_q8_k},
    {{16, "IQ2_XXS", 256, 66}, ggml_detail::decode_iq2_xxs},
    {{17, "IQ2_XS", 256, 74}, ggml_detail::decode_iq2_xs},
    {{18, "IQ3_XXS", 256, 98}, ggml_detail::decode_iq3_xxs},
    {{19, "IQ1_S", 256, 50}, ggml_detail::decode_iq1_s},
    {{20, "IQ4_NL", 32, 18}, ggml_detail::decode_iq4_nl},
    {{21, "IQ3_S", 256, 110}, ggml_detail::decode_iq3_s},
    {{22, "IQ2_S", 256, 82}, ggml_detail::decode_iq2_s},
    {{23, "IQ4_XS", 256, 136}, ggml_detail::decode_iq4_xs},
    {{29, "IQ1_M", 256, 56}, ggml_detail::decode_iq1_m},
    {{34, "TQ1_0", 256, 54}, ggml_detail::decode_tq1_0},
    {{35, "TQ2_0", 256, 66}, ggml_detail::decode_tq2_0},
    {{39, "MXFP4", 32, 17}, ggml_detail::decode_mxfp4},
};

const FormatEntry* find_entry(uint32_t type_id) {
  for (const auto& e : kFormats)
    if (e.format.type_id == type_id) return &e;
  return nullptr;
}

}  // namespace

const GgmlBlockFormat* ggml_block_format(uint32_t type_id) {
  const FormatEntry* e = find_entry(type_id);
  return e ? &e->format : nullptr;
}

void dequantize_ggml_blocks(const GgmlBlockFormat& format, const uint8_t* src, uint64_t blocks, float* dst) {
  // The decoder is looked up by type id, so a copy of a table entry works as well as the entry itself.
  const FormatEntry* e = find_entry(format.type_id);
  if (!e) {  // not a format of ours: make the misuse visible rather than leave dst unwritten
    std::fill_n(dst, blocks * format.block_elements, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  e->decode(src, blocks, dst);
}

}  // namespace tmorph::cpu
