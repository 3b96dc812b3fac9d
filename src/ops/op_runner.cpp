#include "ops/op_runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "ops/kernel_call.h"
#include "support/bitshuffle_lz4_decode.h"
#include "tensormorph/contract_math.h"
#include "tensormorph/error.h"
#include "tensormorph/op_contracts.h"

namespace tmorph {

void run_op_once(const Placement& placement, tm_op op, DType dtype, const void* data, uint64_t elements,
                 unsigned threads) {
  KernelArgs args{dtype, data, elements, nullptr, 0, nullptr, 0, threads};
  std::vector<uint8_t> output;
  std::vector<double> edges(257);
  for (size_t i = 0; i < edges.size(); ++i) edges[i] = -4.0 + 8.0 * static_cast<double>(i) / 256.0;
  const tm_histogram_params_v1 hist{256, edges.data()};
  const double probabilities[] = {0.5};
  const tm_quantiles_params_v1 quant{1, probabilities, 0};
  const tm_dequantize_ggml_params_v1 q8_0{8, 0};
  tm_diff_params_v1 diff{nullptr};
  std::vector<float> scales;
  tm_ggml_block_stats_params_v1 block_stats{8, 0, nullptr, nullptr};
  const float unit_scale = 1.0f;
  tm_dequantize_packed_params_v1 fp8{};
  // 4D-STEM ops read the data as 64 x 64 frames (any whole number of them) with no pixel lists.
  const tm_stem_frame_sums_params_v1 stem_sums{4096, 64, 0, nullptr, nullptr, TM_STEM_ALL_PIXELS, 0};
  const tm_stem_pattern_params_v1 stem_pattern{4096};
  // display.colorize: linear thresholds over [-4, 4] (the histogram's range) and a grey table.
  tm_display_colorize_params_v1 colorize{};
  if (op == TM_OP_DISPLAY_COLORIZE) {
    colorize.key_mode = TM_DISPLAY_KEY_VALUE;
    for (uint32_t k = 1; k <= TM_DISPLAY_THRESHOLDS; ++k) colorize.thresholds[k - 1] = -4.0 + 8.0 * k / 256.0;
    for (uint32_t k = 0; k < 256; ++k)
      colorize.table[k][0] = colorize.table[k][1] = colorize.table[k][2] = static_cast<uint8_t>(k), colorize.table[k][3] = 255;
  }
  // stem.ssb_overlap: the data's first floats as G of up to 64 bright-field pixels over a 16 x 16 scan
  // (quadratic variant, zero aberrations, pixels spread over a disk of radius 1).
  constexpr uint64_t kSsbScan = 16, kSsbStride = kSsbScan * (kSsbScan / 2 + 1);
  std::vector<double> ssb_k, ssb_dc, ssb_nu, ssb_e, ssb_row, ssb_col;
  std::vector<float> ssb_g;
  tm_stem_ssb_params_v1 ssb{};
  if (op == TM_OP_STEM_SSB_OVERLAP) {
    const uint64_t pixels = std::clamp<uint64_t>(elements / (2 * kSsbStride), 1, 64), n = kSsbScan * kSsbScan;
    ssb_g.assign(2 * pixels * kSsbStride, 0.0f);
    if (dtype == DType::F32) std::memcpy(ssb_g.data(), data, std::min<uint64_t>(elements, ssb_g.size()) * 4);
    ssb_k.resize(2 * pixels), ssb_dc.assign(pixels, 1.0), ssb_nu.resize(2 * n), ssb_e.resize(2 * n);
    for (uint64_t b = 0; b < pixels; ++b) ssb_k[2 * b] = std::cos(b * 0.1) * 0.5, ssb_k[2 * b + 1] = std::sin(b * 0.1) * 0.5;
    for (uint64_t q = 0; q < n; ++q)
      ssb_nu[2 * q] = ((q / kSsbScan) % 8) * 0.1, ssb_nu[2 * q + 1] = ((q % kSsbScan) % 8) * 0.1, ssb_e[2 * q] = 1;
    ssb_row.assign(2 * pixels * kSsbScan, 0.0), ssb_col = ssb_row;
    for (uint64_t i = 0; i < pixels * kSsbScan; ++i) ssb_row[2 * i] = ssb_col[2 * i] = 1;
    ssb.variant = TM_SSB_QUADRATIC, ssb.rows = ssb.cols = kSsbScan, ssb.pixels = pixels, ssb.slice_stride = kSsbStride;
    ssb.kmax2 = 1, ssb.pixel_k = ssb_k.data(), ssb.dc = ssb_dc.data(), ssb.nu = ssb_nu.data(), ssb.e_chi = ssb_e.data();
    ssb.row_factor = ssb_row.data(), ssb.col_factor = ssb_col.data();
  }
  std::vector<uint8_t> chunk_bytes;  // decode.bitshuffle_lz4's chunks and their offsets
  std::vector<uint64_t> chunk_offsets;
  tm_decode_bitshuffle_lz4_params_v1 decode{};
  switch (op) {
    case TM_OP_STATS_MOMENTS:
      output.resize((elements + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS * sizeof(tm_moments_partial_v1));
      break;
    case TM_OP_STATS_HISTOGRAM:
      args.params = &hist, args.params_size = sizeof hist;
      output.resize(258 * sizeof(uint64_t));
      break;
    case TM_OP_STATS_BITPATTERN_HISTOGRAM:
      output.resize((size_t{1} << (8 * dtype_size(dtype))) * sizeof(uint64_t));
      break;
    case TM_OP_STATS_QUANTILES:
      args.params = &quant, args.params_size = sizeof quant;
      output.resize(sizeof(tm_quantile_value_v1));
      break;
    case TM_OP_DEQUANTIZE_GGML:  // data read as Q8_0 blocks (34 bytes per 32 values)
      args.params = &q8_0, args.params_size = sizeof q8_0;
      args.dtype = DType::F32;
      args.elements = elements / 32 * 32;
      output.resize(args.elements * sizeof(float));
      break;
    case TM_OP_QUANT_MOMENTS:  // data read as Q8_0 blocks, one partial per canonical block
      args.params = &q8_0, args.params_size = sizeof q8_0;
      args.dtype = DType::F32;
      args.elements = elements / 32 * 32;
      output.resize((args.elements + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS * sizeof(tm_moments_partial_v1));
      break;
    case TM_OP_GGML_BLOCK_STATS:  // data read as Q8_0 blocks, scales written
      scales.resize(elements / 32);
      block_stats.scales = scales.data();
      args.params = &block_stats, args.params_size = sizeof block_stats;
      args.dtype = DType::F32;
      args.elements = elements / 32 * 32;
      output.resize(sizeof(tm_ggml_block_stats_v1));
      break;
    case TM_OP_DEQUANTIZE_PACKED:  // data read as FP8 E4M3 codes, one row, one scale
      fp8.scheme = TM_PACKED_FP8, fp8.code_dtype = TM_DTYPE_F8_E4M3FN;
      fp8.rows = 1, fp8.cols = elements, fp8.block_rows = 1, fp8.block_cols = elements, fp8.scales = &unit_scale;
      args.params = &fp8, args.params_size = sizeof fp8;
      args.dtype = DType::F32;
      output.resize(elements * sizeof(float));
      break;
    case TM_OP_DIFF_MOMENTS:  // the data against itself
      diff.b = static_cast<const float*>(data);
      args.params = &diff, args.params_size = sizeof diff;
      output.resize((elements + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS * sizeof(tm_diff_partial_v1));
      break;
    case TM_OP_STEM_FRAME_SUMS:
      args.params = &stem_sums, args.params_size = sizeof stem_sums;
      args.elements = elements / 4096 * 4096;
      output.resize(args.elements / 4096 * TM_STEM_FRAME_SUMS_FIXED * sizeof(uint64_t));
      break;
    case TM_OP_STEM_PATTERN_REDUCE:
      args.params = &stem_pattern, args.params_size = sizeof stem_pattern;
      args.elements = elements / 4096 * 4096;
      output.resize(4096 * (sizeof(uint64_t) + sizeof(uint32_t)));
      break;
    case TM_OP_DISPLAY_COLORIZE:
      args.params = &colorize, args.params_size = sizeof colorize;
      output.resize(TM_DISPLAY_COLORIZE_COUNTS * sizeof(uint64_t) + elements * 4);
      break;
    case TM_OP_STEM_SSB_OVERLAP:
      args.input = ssb_g.data(), args.elements = ssb_g.size(), args.dtype = DType::F32;
      args.params = &ssb, args.params_size = sizeof ssb;
      output.resize(kSsbScan * kSsbScan * 32);
      break;
    case TM_OP_DECODE_BITSHUFFLE_LZ4: {  // 64 KiB frames of `dtype` elements as the data's bytes would decode to
      // (chunks written without a compressor: each 8 KiB block is literals and one long match, support/)
      const uint32_t width = static_cast<uint32_t>(dtype_size(dtype));
      const uint64_t per_chunk = 65536 / width, chunks = std::max<uint64_t>(1, elements / per_chunk);
      const std::vector<uint8_t> literals(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + std::min<uint64_t>(elements * width, 1 << 20));
      chunk_offsets.assign(1, 0);
      const auto chunk = bitshuffle_lz4_chunk_without_compressor(per_chunk, width, bitshuffle_default_block_elements(width), literals);
      for (uint64_t c = 0; c < chunks; ++c) {
        chunk_bytes.insert(chunk_bytes.end(), chunk.begin(), chunk.end());
        chunk_offsets.push_back(chunk_bytes.size());
      }
      decode = decode_params(chunks, per_chunk, chunk_offsets.data());
      args.input = chunk_bytes.data(), args.elements = chunks * per_chunk;
      args.params = &decode, args.params_size = sizeof decode;
      output.resize(chunks * per_chunk * width);
      break;
    }
    default:
      throw Error(ErrorKind::Internal, "run_op_once: unknown op");
  }
  args.output = output.data();
  args.output_size = output.size();
  run_placed_kernel(placement, op, args);
}

}  // namespace tmorph
