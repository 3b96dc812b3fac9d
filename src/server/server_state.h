// What every request handler of `tensormorph serve` shares: the checkpoints opened at start (fixed for
// the server's life; each indexed by a background job while the server already answers), the jobs,
// and the compute runtime (replaced whole when PUT /api/compute changes the saved constraints).
//
// Threading: handlers run on the HTTP server's fixed pool. A checkpoint's index (one SQLite
// connection) is used under that checkpoint's mutex, which its indexing job holds for the whole job;
// requests that need the index of a checkpoint still indexing are refused (503) without waiting.
// Placed display ops run one at a time under render_mutex (a backend promises nothing about concurrent
// calls). `rows` are read under a shared lock of rows_mutex and replaced per checkpoint when its
// indexing ends. Lock order: render_mutex, then a checkpoint's mutex, then rows_mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/remote_checkpoint.h"
#include "app/runtime.h"
#include "index/checkpoint_index.h"
#include "server/fifo_mutex.h"
#include "server/jobs.h"
#include "server/operation_progress.h"
#include "server/stream_gate.h"

namespace tmorph {
struct Acquisition;  // stem/acquisition.h
}

namespace tmorph::server {

// One checkpoint named on the command line. Requests reach it only through its id; no request ever
// names a file.
struct ServedCheckpoint {
  std::string id;                          // "0", "1", ... in command-line order
  std::string path;                        // as given on the command line
  // An http(s)://, hf:// or s3:// checkpoint: its headers fetched at start into stand-ins (the index opens those),
  // its tensors fetched in batches by the indexing job and, for value reads (cells below the stored levels,
  // profiles, outliers), on demand and kept while they fit (RemoteCheckpoint::hold_for_reads). Null when local.
  std::unique_ptr<app::RemoteCheckpoint> remote;
  std::unique_ptr<CheckpointIndex> index;  // opened at start; completed by the job `job`
  std::unordered_map<std::string, size_t> by_name;  // tensor name -> index into checkpoint().tensors
  mutable std::mutex mutex;                // guards index (its SQLite connection)
  enum class Phase { Indexing, Ready, Failed };
  std::atomic<Phase> phase{Phase::Indexing};

  // Its latest indexing job's id, and why indexing failed (when phase is Failed): written by the
  // indexing thread, read by handlers.
  std::string job() const {
    std::lock_guard<std::mutex> lock(status_mutex_);
    return job_;
  }
  std::string failure() const {
    std::lock_guard<std::mutex> lock(status_mutex_);
    return failure_;
  }
  void set_job(std::string id) {
    std::lock_guard<std::mutex> lock(status_mutex_);
    job_ = std::move(id);
    failure_.clear();
  }
  void set_failure(std::string why) {
    std::lock_guard<std::mutex> lock(status_mutex_);
    failure_ = std::move(why);
  }

 private:
  mutable std::mutex status_mutex_;
  std::string job_, failure_;
};

// One 4D-STEM acquisition named on the command line (a master file, a data file, or a folder holding one
// master). Its files may still be being written: each request opens it again (headers only), so nothing of it
// is kept here and its readiness is always current.
struct ServedAcquisition {
  std::string id;    // "a0", "a1", ... in command-line order (checkpoints are "0", "1", ...)
  std::string path;  // as given on the command line
  // The acquisition as last opened for a product while complete, and the identity of its files then
  // (reopen_for_products, stem_request.h).
  std::mutex opened_mutex;
  std::shared_ptr<const Acquisition> opened;
  std::string opened_identity;
};

// One row of GET /api/tensors, built once at start from the index.
struct TensorRow {
  size_t checkpoint = 0, tensor = 0;
  std::string name, dtype;
  uint64_t bytes = 0;
  nlohmann::json summary;  // checkpoint, name, dtype, shape, parameters, bytes, stats (moments) or null
};

// Builds a runtime from the settings file and the environment, as every CLI command does.
using RuntimeFactory = std::function<std::unique_ptr<app::Runtime>()>;

// The current runtime, swapped whole: a request keeps the snapshot it started with alive.
class ComputeHolder {
 public:
  explicit ComputeHolder(RuntimeFactory factory);
  std::shared_ptr<const app::Runtime> current() const;
  // Rebuilds from the settings; on an exception the old runtime stays current.
  void reload();
  // Serialises read-modify-write of the settings file.
  std::mutex& settings_mutex() { return settings_mutex_; }
  // Approximation steps the viewer's user consented to for this server session (PUT /api/compute
  // allow_approx). Never saved: on the CLI consent is given per command (--allow-approx).
  std::set<std::string> allow_approx() const;
  void set_allow_approx(std::set<std::string> steps);

 private:
  std::set<std::string> allow_approx_;
  RuntimeFactory factory_;
  mutable std::mutex mutex_;
  std::mutex settings_mutex_;
  std::shared_ptr<const app::Runtime> runtime_;
};

struct ServerState {
  explicit ServerState(RuntimeFactory factory) : compute(std::move(factory)) {}
  std::vector<std::unique_ptr<ServedCheckpoint>> checkpoints;
  std::vector<std::unique_ptr<ServedAcquisition>> acquisitions;
  std::vector<TensorRow> rows;  // every tensor of every checkpoint, in checkpoint then file order
  mutable std::shared_mutex rows_mutex;
  JobRegistry jobs;
  // Long requests the page named with progress_id (operation_progress.h).
  ProgressRegistry progress;
  StreamGate readiness_streams;  // GET /api/acquisitions/{id}/events: bounded, stopped with the server
  class IndexingQueue* indexing = nullptr;  // runs indexing jobs (POST /api/jobs queues one); set at start
  ComputeHolder compute;
  FifoMutex render_mutex;  // held for a whole render (cells and colours); taken in arrival order
  std::string web_root;     // canonical static-file root, or empty for the built-in page
  std::string version;
  uint64_t index_max_bytes_per_s = 0;  // indexing jobs' average read rate (serve --index-max-rate); 0: unlimited
  std::string product_cache;  // 4D-STEM prepared products read (serve --product-cache); empty: the user's default
  // The backends the project's parity matrix knows ({name: {kind, description, …}}), so the Compute
  // panel can list those this build or machine lacks.
  nlohmann::json known_backends = nlohmann::json::object();
};

// The tensor `name` of the checkpoint with id `ckpt`; throws HttpError 404 naming what is unknown, 503
// while the checkpoint is being indexed (naming its job), 500 when its indexing failed.
struct TensorRef {
  ServedCheckpoint& checkpoint;
  size_t tensor;
  const CheckpointTensor& info() const { return checkpoint.index->checkpoint().tensors[tensor]; }
};
TensorRef find_tensor(ServerState& state, const std::string& ckpt, const std::string& name);

// Sets checkpoints[i]'s tensors in state.rows (statistics from its index; tensors without get
// "stats": null and "unavailable": why, or that they are being indexed). The caller holds the
// checkpoint's mutex, or no job runs on it yet.
void set_rows(ServerState& state, size_t checkpoint);

// The indexing job of checkpoints[i] (its job id already assigned): computes what the index lacks with
// progress reported to state.jobs, under the session's approximation consent (ComputeHolder), then sets
// its rows and phase. Stops early when `cancel` turns true. Never throws: a failure is the job's and the
// checkpoint's state.
void run_indexing_job(ServerState& state, size_t checkpoint, const std::atomic<bool>& cancel);

}  // namespace tmorph::server
