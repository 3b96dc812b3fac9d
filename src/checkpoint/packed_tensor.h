// A logical tensor that a safetensors checkpoint stores as several parts under a quantization scheme
// (GPTQ, AWQ, bitsandbytes NF4/FP4, FP8 with scales, gpt-oss MXFP4); docs/formats.md gives each layout
// and the source it follows. Recognised by packed_schemes.h; decoded by checkpoint/packed_dequantize.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph {

// One stored tensor that makes up part of a logical one.
struct PackedPart {
  std::string role;               // "qweight", "qzeros", "scales", "g_idx", "weight", "weight_scale",
                                  // "blocks", "absmax", "quant_map", "nested_absmax", ...
  std::string name;               // the stored tensor's name
  DType dtype = DType::U8;
  std::vector<uint64_t> shape;
  size_t file_index = 0;          // into Checkpoint::files
  uint64_t file_offset = 0, bytes = 0;
};

struct PackedTensor {
  tm_packed_scheme scheme = TM_PACKED_FP8;
  std::string variant;            // what users call it: "gptq", "gptq-v2", "awq", "bnb-nf4", "bnb-fp4", "fp8", "mxfp4"
  std::string scale_layout;       // FP8: "per-tensor", "per-channel" or "block"; else empty
  uint32_t bits = 0;              // code bits (GPTQ 2/3/4/8, AWQ 4; the others are implied)
  int32_t zero_offset = 0;        // GPTQ v1: 1 (stored zeros are zero - 1)
  DType code_dtype = DType::U8;   // FP8: the code format
  uint64_t rows = 0, cols = 0;    // the logical matrix (leading dimensions folded into rows)
  uint64_t block_rows = 0, block_cols = 0;  // FP8 scale blocks; bnb elements per absmax; AWQ group size
  uint64_t groups = 0;            // GPTQ/AWQ rows of scales
  uint64_t group_size = 0;        // GPTQ: to synthesise g_idx when it is not stored
  uint64_t nested_block = 0;      // bnb double quantization: absmax codes per nested_absmax entry
  float nested_offset = 0;        // and the offset added to every decoded absmax
  std::vector<PackedPart> parts;  // parts[0] holds the codes

  const PackedPart* part(const std::string& role) const {
    for (const auto& p : parts)
      if (p.role == role) return &p;
    return nullptr;
  }
};

// "fp8", "mxfp4", "bnb4", "gptq", "awq": the kernel-level scheme names of the parity matrix.
const char* packed_scheme_name(tm_packed_scheme s);

// The descriptor as JSON (for the index and reports) and back; from_json throws BadInput naming the field.
nlohmann::json packed_to_json(const PackedTensor& p);
PackedTensor packed_from_json(const nlohmann::json& j);

}  // namespace tmorph
