#include "app/checkpoint_json.h"

#include <filesystem>

#include "app/result_json.h"
#include "ops/placement_json.h"

namespace tmorph::app {

nlohmann::json packed_report(const Checkpoint& c, const PackedTensor& p) {
  nlohmann::json j = packed_to_json(p);
  for (auto& part : j["parts"]) part["file"] = c.files.at(part["file"].get<size_t>())->path();
  return j;
}

nlohmann::json quantization_json(const Checkpoint& c, const CheckpointTensor& t, bool file_names_only) {
  if (!t.dequantized()) return nullptr;
  nlohmann::json j = {{"stored_type", t.stored_type},
                      {"bits_per_weight", t.elements ? 8.0 * static_cast<double>(t.bytes) / static_cast<double>(t.elements) : 0.0}};
  if (t.ggml_type()) j["ggml_type"] = *t.ggml_type();
  if (t.packed()) {
    j["packed"] = packed_report(c, *t.packed());
    if (file_names_only)
      for (auto& part : j["packed"]["parts"])
        part["file"] = std::filesystem::path(part["file"].get<std::string>()).filename().string();
  }
  return j;
}

nlohmann::json strides_json(const CheckpointTensor& t) { return t.strided() ? nlohmann::json(t.strides()) : nlohmann::json(nullptr); }

nlohmann::json tensor_entry_json(const CheckpointTensor& t) {
  nlohmann::json e = {{"name", t.name}, {"stored_type", t.stored_type}, {"shape", t.shape},
                      {"elements", t.elements}, {"bytes", t.bytes}, {"offset", t.file_offset}};
  if (!t.ne.empty()) e["ne"] = t.ne;
  if (t.strided()) e["strides"] = t.strides();
  if (t.chunked()) e["chunks"] = t.chunks().size();
  return e;
}

nlohmann::json tensor_listing_json(const Checkpoint& c, const CheckpointTensor& t) {
  nlohmann::json e = tensor_entry_json(t);
  e["dtype"] = t.dtype ? nlohmann::json(dtype_name(*t.dtype)) : nlohmann::json(nullptr);
  e["file"] = c.files[t.file_index]->path();
  e["readable"] = t.readable();
  if (t.packed()) e["packed"] = packed_report(c, *t.packed());
  if (!t.unavailable_reason.empty()) e["unavailable"] = t.unavailable_reason;
  return e;
}

void add_tensor_stats_json(nlohmann::json& e, const Checkpoint& c, const CheckpointTensor& t, const StatsResult& r,
                           bool from_index) {
  e["dtype"] = t.dtype ? dtype_name(*t.dtype) : "f32";
  if (t.dequantized()) e["dequantized_from"] = t.stored_type;
  if (t.packed()) e["packed"] = packed_report(c, *t.packed());
  e["stats"] = stats_json(r);
  e["placement"] = placements_json(r.placement);
  e["source"] = from_index ? "index" : "computed";
}

}  // namespace tmorph::app
