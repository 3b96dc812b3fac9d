#include "server/stats_json.h"

#include <filesystem>

#include "app/checkpoint_json.h"
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
  if (t.strided()) j["strides"] = app::strides_json(t);
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
