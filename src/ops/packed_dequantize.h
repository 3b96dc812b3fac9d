// Packed quantized tensors (safetensors schemes: GPTQ, AWQ, bitsandbytes NF4/FP4, FP8 with scales,
// gpt-oss MXFP4) decoded to float32 through the planner's placement of dequantize.packed.
#pragma once

#include <cstdint>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "tensormorph/placement.h"
#include "tensormorph/stats.h"

namespace tmorph {

class Planner;

// Where dequantization of p runs. Throws Unavailable naming the scheme when no backend decodes it.
Placement place_packed_dequantize(const Planner& planner, const PackedTensor& p, uint64_t elements);

// One packed tensor made ready to decode: its side parts validated and widened to what the kernel
// contract takes (scales and absmax as float32, exactly; g_idx synthesised when not stored). Holds
// pointers into c's mappings: c must outlive it.
class PackedDecoder {
 public:
  // Throws BadInput naming the part when a part lies outside its file or holds an out-of-range index
  // (a g_idx entry beyond the groups), and Unavailable when t's scheme cannot be decoded here.
  PackedDecoder(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner);

  const Placement& placement() const { return placement_; }
  uint64_t rows() const { return params_.rows; }
  uint64_t cols() const { return params_.cols; }

  // Writes logical rows [first, first + count) to dst (count * cols() floats).
  void decode_rows(uint64_t first, uint64_t count, float* dst, unsigned threads) const;

 private:
  Placement placement_;
  tm_dequantize_packed_params_v1 params_{};
  const uint8_t* codes_ = nullptr;
  std::vector<float> scales_;
  std::vector<int32_t> group_index_;
};

// Exact statistics of t's float32 values (decoded into memory within options.memory_budget_bytes, else
// into an unlinked scratch file); the placement list starts with the dequantization.
StatsResult compute_packed_stats(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner,
                                 const StatsOptions& options);

}  // namespace tmorph
