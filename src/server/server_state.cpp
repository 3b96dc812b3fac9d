#include "server/server_state.h"

#include <algorithm>
#include <cstdio>

#include "app/indexing.h"
#include "app/result_json.h"
#include "server/http_util.h"
#include "server/stats_json.h"
#include "checkpoint/tensor_stats.h"
#include "core/name_suggestions.h"
#include "tensormorph/error.h"

namespace tmorph::server {

ComputeHolder::ComputeHolder(RuntimeFactory factory) : factory_(std::move(factory)), runtime_(factory_()) {}

std::shared_ptr<const app::Runtime> ComputeHolder::current() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return runtime_;
}

std::set<std::string> ComputeHolder::allow_approx() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return allow_approx_;
}

void ComputeHolder::set_allow_approx(std::set<std::string> steps) {
  std::lock_guard<std::mutex> lock(mutex_);
  allow_approx_ = std::move(steps);
}

void ComputeHolder::reload() {
  std::shared_ptr<const app::Runtime> fresh = factory_();
  std::lock_guard<std::mutex> lock(mutex_);
  runtime_ = std::move(fresh);
}

TensorRef find_tensor(ServerState& state, const std::string& ckpt, const std::string& name) {
  for (auto& c : state.checkpoints) {
    if (c->id != ckpt) continue;
    const auto it = c->by_name.find(name);
    if (it == c->by_name.end()) {
      std::vector<std::string> known;
      for (const auto& t : c->index->checkpoint().tensors) known.push_back(t.name);
      throw HttpError(404, "checkpoint " + ckpt + " has no tensor named '" + name + "'" + did_you_mean(name, known));
    }
    switch (c->phase.load()) {
      case ServedCheckpoint::Phase::Ready: return {*c, it->second};
      case ServedCheckpoint::Phase::Indexing: {
        // A tensor committed already is served while the job runs, when the job lets go of the index between
        // batches (a remote checkpoint's job does; a local one holds it throughout).
        if (std::unique_lock<std::mutex> lock(c->mutex, std::try_to_lock); lock.owns_lock() && c->index->has_stats(it->second))
          return {*c, it->second};
        const std::string id = c->job();
        const auto job = state.jobs.find(id);
        std::string done;
        if (job && job->bytes_total)
          done = ", " + std::to_string(100 * job->bytes_done / job->bytes_total) + "% of " + std::to_string(job->bytes_total) + " bytes";
        throw HttpError(503, "checkpoint " + ckpt + " is being indexed (job " + id + done + "; GET /api/jobs/" + id +
                                 "/events follows it): try again when it is done");
      }
      case ServedCheckpoint::Phase::Failed:
        throw HttpError(500, "checkpoint " + ckpt + " could not be indexed: " + c->failure());
    }
  }
  throw HttpError(404, "no checkpoint with id '" + ckpt + "' (see /api/checkpoints)");
}

void set_rows(ServerState& state, size_t checkpoint) {
  const ServedCheckpoint& sc = *state.checkpoints[checkpoint];
  const auto phase = sc.phase.load();
  const std::string pending = phase == ServedCheckpoint::Phase::Indexing ? "being indexed (job " + sc.job() + ")"
                              : phase == ServedCheckpoint::Phase::Failed ? "indexing failed (job " + sc.job() + ")"
                                                                         : "not indexed";
  std::vector<TensorRow> rows;
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
      row.summary["stats"] = app::moments_json(stats->moments);
    } else {
      row.summary["stats"] = nullptr;
      const auto why = unreadable_reason(t, planner);
      row.summary["unavailable"] = why ? *why : pending;
    }
    rows.push_back(std::move(row));
  }
  std::unique_lock<std::shared_mutex> lock(state.rows_mutex);
  std::erase_if(state.rows, [&](const TensorRow& r) { return r.checkpoint == checkpoint; });
  // Checkpoint order: before the first row of a later checkpoint.
  const auto at = std::find_if(state.rows.begin(), state.rows.end(), [&](const TensorRow& r) { return r.checkpoint > checkpoint; });
  state.rows.insert(at, std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
}

namespace {

// A remote checkpoint's job: its tensors fetched and indexed in batches (app::index_remote), the checkpoint's mutex
// held for each batch's indexing only, so requests read what earlier batches committed while later ones are fetched;
// the tensor rows are refreshed after every batch. Returns with `lock` holding the mutex, as the local path does.
IndexingReport index_remote_served(ServerState& state, size_t checkpoint, const IndexingOptions& opt, const Planner& planner,
                                   std::unique_lock<std::mutex>& lock) {
  ServedCheckpoint& sc = *state.checkpoints[checkpoint];
  const Checkpoint& c = sc.index->checkpoint();
  const std::string job = sc.job();
  std::vector<size_t> todo;
  uint64_t total = 0, done_bytes = 0;
  size_t done_tensors = 0;
  lock.lock();
  for (size_t i = 0; i < c.tensors.size(); ++i)
    if (c.tensors[i].readable() && !sc.index->has_stats(i)) todo.push_back(i), total += c.tensors[i].bytes;
  lock.unlock();
  const IndexingReport batches = app::index_remote(c, todo, *sc.remote, opt.memory_budget, [&](const std::vector<size_t>& batch) {
    std::lock_guard<std::mutex> batch_lock(sc.mutex);
    IndexingOptions o = opt;
    o.only = batch;
    o.progress = [&](const IndexingProgress& p) {
      state.jobs.progress(job, done_bytes + p.bytes_done, total, done_tensors + p.tensors_done, todo.size(), p.seconds);
    };
    const IndexingReport r = index_checkpoint(*sc.index, planner, o);
    done_bytes += r.bytes, done_tensors += r.computed;
    set_rows(state, checkpoint);  // the inventory shows this batch's statistics now
    return r;
  });
  lock.lock();
  if (batches.cancelled) return batches;
  IndexingOptions whole = opt;  // every tensor is indexed or unreadable now: this pass reads nothing
  whole.only.clear();
  return app::remote_indexing_report(index_checkpoint(*sc.index, planner, whole), batches);
}

}  // namespace

void run_indexing_job(ServerState& state, size_t checkpoint, const std::atomic<bool>& cancel) {
  ServedCheckpoint& sc = *state.checkpoints[checkpoint];
  const std::string job = sc.job();
  try {
    const auto rt = state.compute.current();
    IndexingOptions opt = app::indexing_options(*rt, {}, true);
    opt.cancel = &cancel;
    opt.max_bytes_per_s = state.index_max_bytes_per_s;
    opt.allowed_approx_steps = state.compute.allow_approx();
    opt.progress = [&](const IndexingProgress& p) {
      state.jobs.progress(job, p.bytes_done, p.bytes_total, p.tensors_done, p.tensors_total, p.seconds);
    };
    std::unique_lock<std::mutex> lock(sc.mutex, std::defer_lock);
    const IndexingReport r = sc.remote ? index_remote_served(state, checkpoint, opt, rt->planner(), lock)
                                       : (lock.lock(), index_checkpoint(*sc.index, rt->planner(), opt));
    if (r.cancelled) {
      state.jobs.finish(job, "cancelled", "", nullptr);
      return;  // the server is stopping: the checkpoint stays "indexing"
    }
    sc.phase = ServedCheckpoint::Phase::Ready;
    set_rows(state, checkpoint);
    lock.unlock();
    state.jobs.finish(job, "done", "",
                      {{"computed", r.computed}, {"already_indexed", r.already_indexed}, {"unavailable", r.unavailable},
                       {"bytes", r.bytes}, {"seconds", r.seconds}, {"workers", r.workers}});
    std::fprintf(stderr, "tensormorph: checkpoint %s indexed: %zu tensor(s) computed, %zu already in the index, %.2f s\n",
                 sc.id.c_str(), r.computed, r.already_indexed, r.seconds);
  } catch (const std::exception& e) {
    sc.set_failure(e.what());
    sc.phase = ServedCheckpoint::Phase::Failed;
    // Refused for want of consent: the Compute panel's preview shows the ladder; consent, then re-run.
    const auto* err = dynamic_cast<const Error*>(&e);
    const bool consent = err && err->kind() == ErrorKind::PrecisionRefused;
    state.jobs.finish(job, "failed", e.what(), consent ? nlohmann::json{{"needs_consent", true}} : nlohmann::json(nullptr));
    try {
      std::lock_guard<std::mutex> lock(sc.mutex);
      set_rows(state, checkpoint);  // what was committed before the failure, and why the rest is missing
    } catch (const std::exception& again) {
      std::fprintf(stderr, "tensormorph: checkpoint %s: its rows could not be read after the failure: %s\n", sc.id.c_str(), again.what());
    }
    std::fprintf(stderr, "tensormorph: checkpoint %s could not be indexed: %s\n", sc.id.c_str(), e.what());
  }
}

}  // namespace tmorph::server
