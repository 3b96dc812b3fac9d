// Quantized tensors (ggml block formats): dequantization placed by the planner like any op, and exact
// statistics of the dequantized values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensormorph/placement.h"
#include "tensormorph/stats.h"

namespace tmorph {

class Planner;

// A tensor stored in a ggml block format: `elements` values in elements / block_elements blocks
// (checkpoint/ggml_quantized.h builds one from the GGUF type table).
struct QuantizedTensor {
  uint32_t ggml_type = 0;      // ggml type id (2 = Q4_0, ...)
  std::string format;          // its name, for reports
  uint32_t block_elements = 0;
  uint32_t block_bytes = 0;
  const uint8_t* data = nullptr;
  uint64_t elements = 0;
};

// Where dequantization of t runs. Throws Unavailable (naming the format) when no backend decodes it.
Placement place_dequantize(const Planner& planner, const QuantizedTensor& t);

// Dequantizes elements [first, first + count) of t into dst (float32); first and count are whole
// blocks (count may end at the tensor's end).
void dequantize_range(const Placement& placement, const QuantizedTensor& t, uint64_t first, uint64_t count, float* dst,
                      unsigned threads);

// Exact statistics of t's dequantized values (float32), decoded a piece at a time in two passes
// (streamed_stats.h): memory is bounded by one piece whatever the tensor's size. The placement list
// starts with the dequantization.
StatsResult compute_quantized_stats(const QuantizedTensor& t, const Planner& planner, const StatsOptions& options);

// What quantization did to t, read from its blocks without dequantizing (op quant.block_stats).
struct QuantizationStats {
  double bits_per_weight = 0;              // stored bits per element, scales included
  std::optional<StatsResult> scales;       // distribution of the blocks' (super-block) scales
  std::optional<StatsResult> mins;         // and of their mins, for formats that store one
  uint32_t code_bits = 0;                  // 0: this format's codes are not counted
  std::vector<uint64_t> code_counts;       // 2^code_bits entries (int8 codes: 256, index q + 128)
  uint64_t codes = 0, saturated = 0;       // codes counted; those at either end of the range
  std::vector<Placement> placement;        // the block read, then the statistics of the scales
};
QuantizationStats compute_quantization_stats(const QuantizedTensor& t, const Planner& planner, const StatsOptions& options);

}  // namespace tmorph
