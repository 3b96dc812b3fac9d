// libFuzzer harness: a sharded checkpoint's model.safetensors.index.json (open_checkpoint on the index,
// src/checkpoint/checkpoint.h), read beside two real shards this harness writes once:
//   model-00001-of-00002.safetensors: model.embed.weight F32 [4, 2], model.norm.weight BF16 [3]
//   model-00002-of-00002.safetensors: lm_head.weight U8 [5]
// The input is the index file's bytes. open_checkpoint reads the index by path (core/json_file.h), so the
// input is written to a file of the harness's scratch folder per run: the same path real indexes take.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "checkpoint/openers/open_checkpoint.h"
#include "formats/safetensors_writer.h"
#include "fuzz_support.h"
#include "tensormorph/error.h"

namespace {

struct Spec {
  const char* name;
  const char* dtype;
  std::vector<uint64_t> shape;
  uint64_t bytes;
};

void write_shard(const std::string& path, const std::vector<Spec>& tensors) {
  tmorph::SafetensorsWriter w(path);
  for (const auto& t : tensors) w.add_tensor(t.name, t.dtype, t.shape);
  w.write_header();
  for (const auto& t : tensors) {
    const std::vector<uint8_t> zeros(t.bytes);
    w.begin_tensor(t.name);
    w.append(zeros.data(), zeros.size());
    w.end_tensor();
  }
  w.finish();
}

const std::string& index_path() {
  static const std::string path = [] {
    const std::string dir = tmorph::fuzz::scratch_dir();
    write_shard(dir + "/model-00001-of-00002.safetensors",
                {{"model.embed.weight", "F32", {4, 2}, 32}, {"model.norm.weight", "BF16", {3}, 6}});
    write_shard(dir + "/model-00002-of-00002.safetensors", {{"lm_head.weight", "U8", {5}, 5}});
    return dir + "/model.safetensors.index.json";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = index_path();
  tmorph::fuzz::write_file(path, data, size);
  try {
    const tmorph::Checkpoint c = tmorph::open_checkpoint(path);
    TM_FUZZ_CHECK(c.tensors.size() <= 3 && c.files.size() <= 2 && !c.sidecars.empty());
    for (const auto& t : c.tensors) {
      TM_FUZZ_CHECK(t.file_index < c.files.size());
      TM_FUZZ_CHECK(t.file_offset <= c.files[t.file_index]->size() && t.bytes <= c.files[t.file_index]->size() - t.file_offset);
    }
    if (tmorph::fuzz::verbose()) std::fprintf(stderr, "opened: %zu tensors in %zu shards\n", c.tensors.size(), c.files.size());
  } catch (const tmorph::Error& e) {
    if (tmorph::fuzz::verbose()) std::fprintf(stderr, "refused: %s\n", e.what());
  }
  return 0;
}
