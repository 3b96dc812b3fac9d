// The op table (op_table.h).
#include "compute/op_table.h"

#include <array>

#include "tensormorph/op_contracts.h"

namespace tmorph {

namespace {

namespace ka = known_answer_cases;
namespace cc = calibration_calls;

constexpr std::array<OpDescriptor, TM_OP_COUNT_ - 1> kOps{{
    {TM_OP_STATS_MOMENTS, "stats.moments", 0, ka::stats_moments, cc::stats_moments},
    {TM_OP_STATS_HISTOGRAM, "stats.histogram", sizeof(tm_histogram_params_v1), ka::stats_histogram, cc::stats_histogram},
    {TM_OP_STATS_BITPATTERN_HISTOGRAM, "stats.bitpattern_histogram", 0, ka::stats_bitpattern_histogram, cc::stats_bitpattern_histogram},
    {TM_OP_STATS_QUANTILES, "stats.quantiles", sizeof(tm_quantiles_params_v1), ka::stats_quantiles, cc::stats_quantiles},
    {TM_OP_DEQUANTIZE_GGML, "dequantize.ggml", sizeof(tm_dequantize_ggml_params_v1), ka::dequantize_ggml, cc::dequantize_ggml},
    {TM_OP_DIFF_MOMENTS, "compare.diff_moments", sizeof(tm_diff_params_v1), nullptr, cc::diff_moments},
    {TM_OP_GGML_BLOCK_STATS, "quant.block_stats", sizeof(tm_ggml_block_stats_params_v1), nullptr, cc::ggml_block_stats},
    {TM_OP_DEQUANTIZE_PACKED, "dequantize.packed", sizeof(tm_dequantize_packed_params_v1), nullptr, cc::dequantize_packed},
    {TM_OP_QUANT_MOMENTS, "quant.moments", sizeof(tm_dequantize_ggml_params_v1), ka::quant_moments, cc::quant_moments},
    {TM_OP_STEM_FRAME_SUMS, "stem.frame_sums", sizeof(tm_stem_frame_sums_params_v1), ka::stem_frames, cc::stem_frame_sums},
    {TM_OP_STEM_PATTERN_REDUCE, "stem.pattern_reduce", sizeof(tm_stem_pattern_params_v1), ka::stem_frames, cc::stem_pattern_reduce},
    {TM_OP_DISPLAY_COLORIZE, "display.colorize", sizeof(tm_display_colorize_params_v1), ka::display_colorize, cc::display_colorize},
    {TM_OP_STEM_SSB_OVERLAP, "stem.ssb_overlap", sizeof(tm_stem_ssb_params_v1), ka::stem_ssb_overlap, cc::stem_ssb_overlap},
    {TM_OP_DECODE_BITSHUFFLE_LZ4, "decode.bitshuffle_lz4", sizeof(tm_decode_bitshuffle_lz4_params_v1), ka::decode_bitshuffle_lz4,
     cc::decode_bitshuffle_lz4},
    {TM_OP_LOD_TILE_STATS, "lod.tile_stats", sizeof(tm_tile_stats_params_v1), ka::lod_tile_stats, cc::lod_tile_stats},
    {TM_OP_DIFF_TILE_STATS, "diff.tile_stats", sizeof(tm_diff_tile_params_v1), nullptr, cc::diff_tile_stats},
    {TM_OP_STEM_COMPACT_SUMS, "stem.compact_sums", sizeof(tm_stem_compact_sums_params_v1), ka::stem_compact_sums, cc::stem_compact_sums},
}};

constexpr bool rows_follow_the_enum() {
  for (size_t i = 0; i < kOps.size(); ++i)
    if (kOps[i].id != static_cast<tm_op>(i + 1) || kOps[i].name.empty() || !kOps[i].calibration_call) return false;
  return true;
}
static_assert(rows_follow_the_enum(), "op_table: one row per tm_op, in the enum's order, each with a name and a calibration call");

}  // namespace

std::span<const OpDescriptor> op_table() { return kOps; }

const OpDescriptor* find_op(tm_op op) {
  const int i = static_cast<int>(op);
  return i >= 1 && i < TM_OP_COUNT_ ? &kOps[static_cast<size_t>(i - 1)] : nullptr;
}

}  // namespace tmorph
