// The statistics document (`tensormorph stats PATH --json`, Python's tm.stats): one builder for every face. It
// opens the checkpoint, or its index when the request asks for exactly what the index stores, selects the tensors,
// reads or computes each one's statistics (the quantization report too when asked), refuses nothing silently (an
// unreadable tensor is a row with its reason) and says when a strict --backend left tensors unserved. Faces
// choose where the index lives and how its filling shows progress, then print the rows or the JSON.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "index/checkpoint_index.h"
#include "ops/dequantize.h"
#include "tensormorph/stats.h"

namespace tmorph {
class Planner;
}

namespace tmorph::app {

struct StatsRow {
  const CheckpointTensor* tensor = nullptr;
  nlohmann::json entry;                     // the document's entry for it (tensor_entry_json, stats or why not)
  std::optional<StatsResult> result;        // unset when the tensor is unreadable here
  std::string unavailable;                  // why, when unset
  bool from_index = false;                  // served from the index rather than computed for this request
  std::optional<QuantizationStats> quantization;  // ggml / packed tensors, when asked
};

struct StatsDocumentRequest {
  std::string path;
  std::vector<std::string> tensors;  // empty: every tensor, in checkpoint order
  // Serve from PATH's index: its own statistics options, computed once and stored. Else `options`, for this call.
  bool from_index = false;
  StatsOptions options;
  bool quantization = false;         // add each quantized tensor's quantization report
  // When from_index: opens (or builds) the index, and computes what it lacks for the selected tensors (false when
  // cancelled). Both given by the face (where the index lives, progress, MPI ranks).
  std::function<std::unique_ptr<CheckpointIndex>()> open_index;
  std::function<bool(CheckpointIndex&, const std::vector<size_t>&)> fill_index;
  // Called once the tensors are selected (the index filled), before the first row: the checkpoint and how many rows follow.
  std::function<void(const Checkpoint&, size_t rows)> on_start;
  // Called with each row as soon as it is ready (a terminal prints it then).
  std::function<void(const StatsRow&)> on_row;
};

class StatsDocument {
 public:
  const Checkpoint& checkpoint() const { return index_ ? index_->checkpoint() : *direct_; }
  const std::vector<StatsRow>& rows() const { return rows_; }
  size_t unavailable() const { return unavailable_; }
  bool cancelled() const { return cancelled_; }
  // {"file", "format", "tensors": [entries]}: what `stats --json` prints.
  nlohmann::json json() const;
  // Throws Unavailable when a strict backend (`strict_backend`, non-empty) left any tensor unserved: everything
  // that could be served is in the rows, each refusal with its reason; nothing was substituted.
  void refuse_if_unserved(const std::string& strict_backend) const;
  // Throws Incomplete (exit 7) when any row is unavailable because its data is missing or damaged
  // (CheckpointTensor::damaged), after the faces printed every row: a script can tell the result is incomplete.
  void refuse_if_incomplete() const;

 private:
  friend StatsDocument build_stats_document(const StatsDocumentRequest&, const Planner&);
  std::string path_;
  std::unique_ptr<CheckpointIndex> index_;
  std::optional<Checkpoint> direct_;
  std::vector<StatsRow> rows_;
  size_t unavailable_ = 0;
  size_t damaged_ = 0;
  bool cancelled_ = false;
};

// Builds the document. Throws InvalidArgument naming PATH for a tensor name it does not hold.
StatsDocument build_stats_document(const StatsDocumentRequest& request, const Planner& planner);

}  // namespace tmorph::app
