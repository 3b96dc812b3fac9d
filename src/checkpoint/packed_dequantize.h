// Packed quantized tensors (safetensors schemes: GPTQ, AWQ, bitsandbytes NF4/FP4, FP8 with scales,
// gpt-oss MXFP4) decoded to float32 through the planner's placement of dequantize.packed.
#pragma once

#include <cstdint>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "tensormorph/placement.h"
#include "ops/dequantize.h"
#include "tensormorph/stats.h"

namespace tmorph {

class Planner;

// Where dequantization of p runs. Throws Unavailable naming the scheme when no backend decodes it.
Placement place_packed_dequantize(const Planner& planner, const PackedTensor& p, uint64_t elements);

// One packed tensor made ready to decode: its side parts validated and copied, aligned, into what the
// kernel contract takes (scales and absmax as float32, exactly; zeros and g_idx as int32, g_idx
// synthesised when not stored). The code part stays in c's mapping, at whatever alignment the file
// gives it (kernels read it unaligned): c must outlive the decoder.
class PackedDecoder {
 public:
  // Throws BadInput naming the part when a part lies outside its file or holds an out-of-range index
  // (a g_idx entry beyond the groups), and Unavailable when t's scheme cannot be decoded here.
  PackedDecoder(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner);

  const Placement& placement() const { return placement_; }
  // The scale-like side array the kernel multiplies by (FP8 scale grid, bnb absmax after nested
  // decoding, GPTQ/AWQ scales) as float32; empty for MXFP4, whose scales are E8M0 bytes.
  const std::vector<float>& scales() const { return scales_; }
  const tm_dequantize_packed_params_v1& params() const { return params_; }
  const uint8_t* codes() const { return codes_; }
  uint64_t rows() const { return params_.rows; }
  uint64_t cols() const { return params_.cols; }

  // Writes logical rows [first, first + count) to dst (count * cols() floats).
  void decode_rows(uint64_t first, uint64_t count, float* dst, unsigned threads) const;

 private:
  Placement placement_;
  tm_dequantize_packed_params_v1 params_{};
  const uint8_t* codes_ = nullptr;
  std::vector<float> scales_, code_values_;
  std::vector<int32_t> zeros_, group_index_;
};

// Exact statistics of t's float32 values, decoded a piece of rows at a time in two passes
// (streamed_stats.h); the placement list starts with the dequantization.
StatsResult compute_packed_stats(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner,
                                 const StatsOptions& options);

// What quantization did to t, read from its parts without decoding values: bits per weight (all parts
// over the elements), the distribution of its scales (MXFP4: 2^(e - 127); bnb: absmax after nested
// decoding), the usage of every stored code (GPTQ/AWQ at their bit width, bnb/MXFP4 4-bit, FP8 the raw
// byte) and the saturated share: GPTQ/AWQ codes 0 and 2^bits - 1, the bnb codes of largest |quant_map|,
// MXFP4 +-6, FP8 +-the largest finite value. Counted on the host by the ops layer (no placed kernel).
QuantizationStats compute_packed_quantization_stats(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner,
                                                    const StatsOptions& options);

}  // namespace tmorph
