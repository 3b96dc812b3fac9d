// The call a calibration times for each op (ops/op_runner.h's run_op_once, `tensormorph calibrate`): the
// sample data it is given, read as the op needs (as float32 values, Q8_0 blocks, FP8 codes, 64 x 64 frames or
// SSB spectra), the op's params and the output's size. One builder per row of compute/op_table.h.
#pragma once

#include <cstdint>
#include <vector>

#include "tensormorph/dtype.h"

namespace tmorph {

struct CalibrationCall {
  DType dtype = DType::F32;       // the dtype the kernel is called with
  const void* input = nullptr;    // the sample data, or an input the builder made (SSB spectra, LZ4 chunks)
  uint64_t elements = 0;
  std::vector<uint8_t> params;    // the params struct's bytes; its pointers point into the vectors below
  uint64_t output_bytes = 0;
  std::vector<double> doubles;    // storage the params point into (sized before they are written)
  std::vector<uint64_t> u64s;
  std::vector<float> floats;
  std::vector<uint8_t> bytes;
  std::vector<uint32_t> u32s;
};

// Fills `call` for `elements` values of `dtype` at `data` (the caller keeps them alive while the call runs).
using CalibrationBuilder = void (*)(CalibrationCall& call, DType dtype, const void* data, uint64_t elements);

namespace calibration_calls {
void stats_moments(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void stats_histogram(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void stats_bitpattern_histogram(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void stats_quantiles(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void dequantize_ggml(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void diff_moments(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void ggml_block_stats(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void dequantize_packed(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void quant_moments(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void stem_frame_sums(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void stem_pattern_reduce(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void display_colorize(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void stem_ssb_overlap(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void decode_bitshuffle_lz4(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void lod_tile_stats(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void diff_tile_stats(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
void stem_compact_sums(CalibrationCall& c, DType dtype, const void* data, uint64_t elements);
}  // namespace calibration_calls

}  // namespace tmorph
