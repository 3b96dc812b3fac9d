#include "server/stats_json.h"

#include <filesystem>

#include "checkpoint/packed_tensor.h"
#include "core/json_number.h"
#include "lod/tile_stats.h"

namespace tmorph::server {

std::string tensor_dtype(const CheckpointTensor& t) {
  if (const auto d = t.summary_dtype()) return std::string(dtype_name(*d));
  return t.stored_type;
}

nlohmann::json tensor_identity(const ServedCheckpoint& sc, const CheckpointTensor& t) {
  nlohmann::json j = {{"checkpoint", sc.id},       {"name", t.name},         {"stored_type", t.stored_type},
                      {"dtype", tensor_dtype(t)},  {"shape", t.shape},       {"parameters", t.elements},
                      {"bytes", t.bytes}};
  if (t.dequantized()) j["dequantized_from"] = t.stored_type;
  const Checkpoint& c = sc.index->checkpoint();
  j["file"] = t.file_index < c.files.size() ? std::filesystem::path(c.files[t.file_index]->path()).filename().string() : std::string();
  j["offset"] = t.file_offset;
  if (t.strided()) j["strides"] = t.strides;
  return j;
}

nlohmann::json quantization_json(const Checkpoint& c, const CheckpointTensor& t) {
  if (!t.dequantized()) return nullptr;
  nlohmann::json j = {{"stored_type", t.stored_type},
                      {"bits_per_weight", t.elements ? 8.0 * static_cast<double>(t.bytes) / static_cast<double>(t.elements) : 0.0}};
  if (t.ggml_type) j["ggml_type"] = *t.ggml_type;
  if (t.packed) {
    nlohmann::json p = packed_to_json(*t.packed);
    // Parts name their file by position; the server reports the file name only, never a path.
    for (auto& part : p["parts"]) {
      const size_t f = part["file"].get<size_t>();
      part["file"] = f < c.files.size() ? std::filesystem::path(c.files[f]->path()).filename().string() : std::string();
    }
    j["packed"] = p;
  }
  return j;
}

nlohmann::json pyramid_json(const CheckpointIndex::PyramidInfo& info) {
  const PyramidLayout& l = info.layout;
  nlohmann::json levels = nlohmann::json::array();
  for (size_t k = 0; k < l.levels.size(); ++k)
    levels.push_back({{"level", k},
                      {"grid", {l.levels[k].cols, l.levels[k].rows}},
                      {"tile_elements", {uint64_t{l.tile_rows} << k, uint64_t{l.tile_cols} << k}}});
  const size_t bins = info.edges.empty() ? 0 : info.edges.size() - 1;
  TileStats empty;
  empty.hist.resize(bins);
  return {{"view", {{"spec", view_spec(l.view)}, {"slices", l.view.slices}, {"rows", l.view.rows}, {"cols", l.view.cols}}},
          {"tile_size", {l.tile_rows, l.tile_cols}},
          {"levels", levels},
          {"histogram_edges", json_numbers(info.edges)},
          {"histogram_bins", bins},
          {"tile_record_bytes", encode_tile(empty).size()}};
}

}  // namespace tmorph::server
