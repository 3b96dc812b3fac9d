#include "cli/demo_gguf.h"

#include <algorithm>
#include <filesystem>

#include "checkpoint/gguf_export.h"
#include "checkpoint/openers/open_checkpoint.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

namespace fs = std::filesystem;

// The metadata llama.cpp's converter writes for a llama model, from the demo's shape (no tokenizer: there is none).
std::vector<GgufMetadataValue> gguf_metadata(const DemoShape& a, const std::string& target, uint32_t file_type) {
  auto u32 = [](uint64_t v) { return static_cast<uint32_t>(v); };
  return {{"general.architecture", std::string("llama")},
          {"general.type", std::string("model")},
          {"general.name", "tensormorph demo " + target},
          {"general.description", "tensormorph demo weights (" + std::to_string(a.layers) + " layers, hidden " + std::to_string(a.hidden) +
                                      ") quantized to " + target + " by tensormorph demo; tensor names and row order are the "
                                      "Hugging Face checkpoint's (not llama.cpp's blk.N names, no Q/K row permutation)"},
          {"general.file_type", file_type},
          {"general.quantization_version", uint32_t{2}},
          {"llama.vocab_size", u32(a.vocab)},
          {"llama.context_length", uint32_t{2048}},
          {"llama.embedding_length", u32(a.hidden)},
          {"llama.block_count", u32(a.layers)},
          {"llama.feed_forward_length", u32(a.intermediate)},
          {"llama.rope.dimension_count", u32(a.hidden / a.heads)},
          {"llama.rope.freq_base", 10000.0f},
          {"llama.attention.head_count", u32(a.heads)},
          {"llama.attention.head_count_kv", u32(a.kv_heads)},
          {"llama.attention.layer_norm_rms_epsilon", 1e-5f}};
}

DemoGgufCopy write_copy(const std::string& out_dir, const DemoShape& shape, const Checkpoint& source, const std::string& target,
                        uint32_t type_id, uint32_t file_type, ThreadPool& pool) {
  DemoGgufCopy copy{(fs::path(out_dir) / "gguf" / ("demo-" + target + ".gguf")).string(), target, {}, 0};
  const std::vector<GgufExported> written =
      write_quantized_gguf(source, copy.path, type_id, gguf_metadata(shape, target, file_type), pool);
  const Checkpoint back = open_checkpoint(copy.path);
  bool same = back.format == "gguf" && back.tensors.size() == written.size();
  for (size_t i = 0; same && i < written.size(); ++i)
    same = back.tensors[i].name == written[i].name && back.tensors[i].shape == written[i].shape &&
           back.tensors[i].stored_type == written[i].type;
  if (!same) throw Error(ErrorKind::Internal, copy.path + ": the GGUF reader does not give back the tensors written");
  for (const auto& t : written) {
    auto it = std::find_if(copy.types.begin(), copy.types.end(), [&](const auto& p) { return p.first == t.type; });
    if (it == copy.types.end()) copy.types.emplace_back(t.type, 1);
    else ++it->second;
  }
  copy.bytes = fs::file_size(copy.path);
  return copy;
}

}  // namespace

std::string DemoGgufCopy::types_text() const {
  std::string s;
  for (const auto& [type, n] : types) s += (s.empty() ? "" : ", ") + std::to_string(n) + " " + type;
  return s;
}

std::vector<DemoGgufCopy> write_demo_gguf_copies(const std::string& out_dir, const std::string& index, const DemoShape& shape,
                                                 ThreadPool& pool) {
  const std::string dir = (fs::path(out_dir) / "gguf").string();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw Error(ErrorKind::Io, dir + ": cannot create the output directory" + (ec ? ": " + ec.message() : ""));
  const Checkpoint source = open_checkpoint(index);
  // general.file_type: llama.cpp's LLAMA_FTYPE_MOSTLY_Q8_0 (7) and MOSTLY_Q4_K_S (14), the nearest names for a
  // uniform Q4_K (llama.cpp's Q4_K_S mixes in a few Q5_K tensors; these files do not).
  return {write_copy(out_dir, shape, source, "Q8_0", 8, 7, pool), write_copy(out_dir, shape, source, "Q4_K", 12, 14, pool)};
}

}  // namespace tmorph::cli
