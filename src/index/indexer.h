// Indexing: exact statistics of every tensor of a checkpoint that the index does not hold yet,
// committed to the index one tensor at a time as each completes.
//
// Workers (one per thread) take whole tensors, spreading over the checkpoint's files, and stream each
// with large sequential reads into a small per-worker buffer (so each piece is still in cache for the
// second kernel) while asking the kernel to read further ahead (POSIX_FADV_WILLNEED): I/O overlaps
// compute, and memory stays within the budget whatever the tensor size. 8/16-bit tensors take one
// pass; wider ones take a second pass through the memory map for the histogram and quantiles (see
// StatsStream), whose pages are released afterwards.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "index/checkpoint_index.h"

namespace tmorph {

class Planner;

struct IndexingProgress {
  uint64_t bytes_done = 0, bytes_total = 0;  // tensor bytes of this run
  size_t tensors_done = 0, tensors_total = 0;
  double seconds = 0;
  // A run across the ranks of an MPI job (distributed_indexer.h): each rank's share, rank 0 first.
  struct Rank {
    uint64_t bytes_done = 0, bytes_total = 0;
  };
  std::vector<Rank> ranks;
};

struct IndexingOptions {
  unsigned threads = 0;                     // workers; 0: every core
  uint64_t memory_budget = uint64_t{1} << 30;  // bytes mapped at once over all workers; 0: the default
  std::vector<size_t> only;                 // tensors to index (indexes into checkpoint().tensors); empty: all
  bool pyramids = true;                     // build each dense tensor's statistics pyramid in the same pass
  // Called on the calling thread, about ten times a second and once at the end.
  std::function<void(const IndexingProgress&)> progress;
  // When set and it becomes true, workers take no further tensor; those in progress complete and are
  // committed, and the run returns with `cancelled` (what was committed stays valid).
  const std::atomic<bool>* cancel = nullptr;
  // Approximation steps consented to (--allow-approx, or the viewer's session consent). Statistics
  // computed under one are stored with their method and quantiles_exact = false, never as exact.
  std::set<std::string> allowed_approx_steps;
  // Average read rate, bytes per second of tensor data (0: unlimited), so a background job leaves the
  // disk to other work. Enforced before each tensor is taken: a worker waits until (bytes read so far) /
  // rate seconds have passed, in steps of at most 50 ms, watching `cancel`; after a stall the run may
  // catch up by at most one second's worth of bytes.
  uint64_t max_bytes_per_s = 0;
};

struct IndexingReport {
  size_t computed = 0;         // tensors whose statistics were computed and committed now
  size_t already_indexed = 0;  // found in the index
  size_t unavailable = 0;      // no dense dtype yet (quantized, F4/F6...) or damaged: listed, not computed
  size_t damaged = 0;          // of those, unavailable because their data is missing or damaged (CheckpointTensor::damaged)
  uint64_t bytes = 0;          // tensor bytes read by this run
  double seconds = 0;
  unsigned workers = 0;
  uint64_t window_bytes = 0;     // per worker: bytes per read (the buffer the kernels run on)
  uint64_t readahead_bytes = 0;  // per worker: how far ahead of the current read the kernel is asked to read
  bool cancelled = false;        // options.cancel was set before every tensor was taken
  unsigned ranks = 1;            // processes of the job that computed (distributed_indexer.h)
};

// One tensor's computed statistics and pyramid, before they are committed.
struct TensorResult {
  size_t tensor = 0;  // index into checkpoint().tensors
  StatsResult stats;
  std::optional<Pyramid> pyramid;
  double seconds = 0;  // computing it
};

IndexingReport index_checkpoint(CheckpointIndex& index, const Planner& planner, const IndexingOptions& options);

// The tensors of options.only (empty: all) that a run computes, in checkpoint order: readable here and
// not in the index. Counts the others into report (unavailable, already_indexed).
std::vector<size_t> tensors_to_index(const CheckpointIndex& index, const Planner& planner, const IndexingOptions& options,
                                     IndexingReport& report);

// Computes `tensors` of c with the workers options.threads allows (options.progress is not called).
// On the calling thread: `done` receives each result as it completes, and `tick` is called about ten
// times a second and once at the end with the tensor bytes read so far. Returns the computing part of
// the report (computed, bytes, seconds, workers, window_bytes, readahead_bytes, cancelled). When a
// worker fails, or `done` or `tick` throws, the workers take no further tensor and the first error is
// rethrown once they stopped.
IndexingReport compute_tensors(const Checkpoint& c, const Planner& planner, const IndexingOptions& options,
                               const std::vector<size_t>& tensors, const std::function<void(TensorResult&&)>& done,
                               const std::function<void(uint64_t bytes_done)>& tick);

}  // namespace tmorph
