// tensormorph demo's quantized copies: the demo checkpoint's weights as GGUF files quantized to Q8_0 and to Q4_K
// (checkpoint/gguf_export.h: llama.cpp's type choices, 1-D tensors F32), in OUT/gguf/demo-Q8_0.gguf and
// OUT/gguf/demo-Q4_K.gguf, each opened again with the GGUF opener and checked to give back every tensor's name,
// shape and type. A subfolder, not files beside the shards: OUT is opened through its model.safetensors.index.json,
// and a subfolder keeps OUT one checkpoint whichever opener looks at it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tmorph {
class ThreadPool;
}

namespace tmorph::cli {

struct DemoShape {
  uint64_t hidden, intermediate, layers, heads, kv_heads, vocab;
};

struct DemoGgufCopy {
  std::string path, target;  // target: "Q8_0" or "Q4_K"
  std::vector<std::pair<std::string, uint64_t>> types;  // ggml type -> tensors, in order of first appearance
  uint64_t bytes = 0;        // the file's size
  std::string types_text() const;  // "30 Q4_K, 4 Q5_0, 9 F32"
};

// Reads the checkpoint at `index` (the demo just written) and writes both copies; Io/Internal errors as thrown.
std::vector<DemoGgufCopy> write_demo_gguf_copies(const std::string& out_dir, const std::string& index, const DemoShape& shape,
                                                 ThreadPool& pool);

}  // namespace tmorph::cli
