// A checkpoint's float tensors written as a quantized GGUF file (formats/gguf_writer.h), the blocks made by
// checkpoint/ggml_quantize.h. `tensormorph demo` writes its Q8_0 and Q4_K copies with it.
//
// Tensor types, as llama.cpp's quantizer chooses them for a uniform target:
//   - 1-D tensors (norms, biases) stay F32;
//   - a tensor whose row length (last dimension) is a whole number of the target's blocks gets the target type;
//   - otherwise llama.cpp's fallback for that target: Q4_K -> Q5_0 (rows of 32s), Q8_0 -> F16; and F16 when even the
//     fallback's 32-value blocks do not divide the row.
// Names and row order are the source's (no renaming to llama.cpp's blk.N.* names, no Q/K row permutation), so the
// file pairs with its source by name (compare, diff). Values: dense F32, F16 and BF16 tensors, read exactly as
// float32; any other tensor (integer, quantized, packed) is refused naming it and its type.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace tmorph {

class ThreadPool;

struct GgufMetadataValue {
  std::string key;
  std::variant<std::string, uint32_t, uint64_t, float, bool> value;
};

struct GgufExported {
  std::string name;
  std::string type;  // ggml type name: "Q4_K", "Q5_0", "F32", ...
  std::vector<uint64_t> shape;
};

// The ggml type id (formats/gguf.h's table) a tensor of `shape` gets for `target` (Q8_0 = 8 or Q4_K = 12), as above.
uint32_t gguf_export_type(uint32_t target, const std::vector<uint64_t>& shape);

// Writes every tensor of c, in c's order, to `path` (through path.partial) as GGUF v3 with `metadata` first
// (general.alignment is left at its default, 32). Quantizes on `pool`'s threads; the bytes do not depend on them.
// InvalidArgument for a target other than Q8_0/Q4_K or a tensor that is not dense F32/F16/BF16; Io for the file.
std::vector<GgufExported> write_quantized_gguf(const Checkpoint& c, const std::string& path, uint32_t target,
                                               const std::vector<GgufMetadataValue>& metadata, ThreadPool& pool);

}  // namespace tmorph
