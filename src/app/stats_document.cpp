#include "app/stats_document.h"

#include "app/checkpoint_json.h"
#include "app/result_json.h"
#include "checkpoint/ggml_quantized.h"
#include "checkpoint/openers/open_checkpoint.h"
#include "checkpoint/packed_dequantize.h"
#include "checkpoint/tensor_stats.h"
#include "tensormorph/error.h"
#include "tensormorph/planner.h"

namespace tmorph::app {

namespace {

std::optional<QuantizationStats> quantization_of(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner,
                                                 const StatsOptions& options) {
  if (t.ggml_type()) return compute_quantization_stats(quantized_tensor(*t.ggml_type(), c.data(t), t.elements), planner, options);
  if (t.packed()) return compute_packed_quantization_stats(c, t, planner, options);
  return std::nullopt;
}

}  // namespace

StatsDocument build_stats_document(const StatsDocumentRequest& req, const Planner& planner) {
  StatsDocument d;
  d.path_ = req.path;
  if (req.from_index) d.index_ = req.open_index();
  else d.direct_ = open_checkpoint(req.path);
  const Checkpoint& c = d.checkpoint();
  std::vector<size_t> selected;
  for (const auto& name : req.tensors) selected.push_back(c.position(name, req.path));
  if (req.tensors.empty())
    for (size_t i = 0; i < c.tensors.size(); ++i) selected.push_back(i);
  if (req.from_index && !req.fill_index(*d.index_, selected)) {
    d.cancelled_ = true;
    return d;
  }
  if (req.on_start) req.on_start(c, selected.size());
  for (size_t i : selected) {
    const CheckpointTensor& t = c.tensors[i];
    StatsRow row;
    row.tensor = &t;
    row.entry = tensor_entry_json(t);
    if (const auto why = unreadable_reason(t, planner)) {
      row.entry["stats"] = nullptr;
      row.entry["unavailable"] = *why;
      row.entry["damaged"] = t.damaged;  // missing or damaged data, as opposed to no kernel for its type
      row.unavailable = *why;
      ++d.unavailable_;
      if (t.damaged) ++d.damaged_;
    } else {
      std::optional<StatsResult> stored;
      if (req.from_index) {
        stored = d.index_->load_stats(i);
        if (!stored) throw Error(ErrorKind::Internal, t.name + ": statistics missing from the index after indexing");
      }
      // Approximate quantiles in the index were consented to elsewhere (the viewer's session), not by this request:
      // computed again, exactly or refused with the ladder.
      if (stored && !stored->quantiles_exact && !stored->quantiles.empty()) stored.reset();
      row.from_index = stored.has_value();
      row.result = stored ? std::move(*stored) : compute_tensor_stats(c, t, planner, req.options);
      // Quantized tensors are summarised as the float32 values they dequantize to.
      add_tensor_stats_json(row.entry, c, t, *row.result, row.from_index);
      if (req.quantization) {
        row.quantization = quantization_of(c, t, planner, req.options);
        if (row.quantization) row.entry["quantization"] = quantization_stats_json(*row.quantization);
      }
    }
    if (req.on_row) req.on_row(row);
    d.rows_.push_back(std::move(row));
  }
  return d;
}

nlohmann::json StatsDocument::json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& r : rows_) list.push_back(r.entry);
  return {{"file", path_}, {"format", checkpoint().format}, {"tensors", list}};
}

void StatsDocument::refuse_if_unserved(const std::string& strict_backend) const {
  if (strict_backend.empty() || !unavailable_) return;
  throw Error(ErrorKind::Unavailable, std::to_string(unavailable_) + " of " + std::to_string(rows_.size()) +
                                          " tensors could not be served by --backend " + strict_backend +
                                          " (each reported with its reason); nothing was substituted");
}

void StatsDocument::refuse_if_incomplete() const {
  if (!damaged_) return;
  throw Error(ErrorKind::Incomplete, path_ + ": " + std::to_string(damaged_) + " of " + std::to_string(rows_.size()) +
                                         " tensors could not be read: their data is missing or damaged (each is listed with "
                                         "its reason); the other tensors' statistics are complete");
}

}  // namespace tmorph::app
