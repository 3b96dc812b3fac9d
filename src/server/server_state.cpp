#include "server/server_state.h"

#include "server/http_util.h"
#include "server/stats_json.h"
#include "ops/tensor_stats.h"

namespace tmorph::server {

ComputeHolder::ComputeHolder(RuntimeFactory factory) : factory_(std::move(factory)), runtime_(factory_()) {}

std::shared_ptr<const cli::Runtime> ComputeHolder::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return runtime_;
}

void ComputeHolder::reload() {
  std::shared_ptr<const cli::Runtime> fresh = factory_();
  std::lock_guard<std::mutex> lock(mutex_);
  runtime_ = std::move(fresh);
}

TensorRef find_tensor(ServerState& state, const std::string& ckpt, const std::string& name) {
  for (auto& c : state.checkpoints) {
    if (c->id != ckpt) continue;
    const auto it = c->by_name.find(name);
    if (it == c->by_name.end()) throw HttpError(404, "checkpoint " + ckpt + " has no tensor named '" + name + "'");
    return {*c, it->second};
  }
  throw HttpError(404, "no checkpoint with id '" + ckpt + "' (see /api/checkpoints)");
}

void add_rows(ServerState& state, size_t checkpoint) {
  const ServedCheckpoint& sc = *state.checkpoints[checkpoint];
  const Checkpoint& c = sc.index->checkpoint();
  const auto rt = state.compute.current();
  const Planner planner = rt->planner();
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const CheckpointTensor& t = c.tensors[i];
    TensorRow row;
    row.checkpoint = checkpoint, row.tensor = i, row.name = t.name, row.bytes = t.bytes;
    row.dtype = tensor_dtype(t);
    row.summary = tensor_identity(sc, t);
    const auto stats = sc.index->has_stats(i) ? sc.index->load_stats(i) : std::nullopt;
    if (stats) {
      row.summary["stats"] = moments_json(stats->moments);
    } else {
      row.summary["stats"] = nullptr;
      const auto why = unreadable_reason(t, planner);
      row.summary["unavailable"] = why ? *why : std::string("not indexed");
    }
    state.rows.push_back(std::move(row));
  }
}

}  // namespace tmorph::server
