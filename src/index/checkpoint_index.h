// The persistent index of one checkpoint: a SQLite database holding its files' identities, its
// metadata, its tensors and each tensor's exact statistics and histogram.
//
// Opening checks every file's identity (size, mtime, header hash) and the directory layout. When all
// match, the inventory comes from the database alone: no header is parsed. Otherwise the headers are
// parsed and validated again and only the files whose identity changed lose their tensors' stored
// statistics. Statistics are committed one tensor per transaction, so a killed run leaves a valid index
// that the next run completes.
//
// Where: --index PATH, else $XDG_CACHE_HOME/tensormorph/index/<name>-<hash of absolute path>.sqlite.
// When that location cannot be written (a read-only volume, a read-only index file) the index lives in
// memory for this run, starting from the stored copy when one can be read, and the report says so.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "lod/pyramid.h"
#include "tensormorph/stats.h"

namespace tmorph {

class SqliteDb;

struct IndexOpenReport {
  std::string database;                      // the file, or ":memory:"
  bool persisted = true;                     // false: this run's results are not saved
  std::string warning;                       // why not, or what was repaired
  bool reused = false;                       // every identity matched; no header was parsed
  std::vector<std::string> reindexed_files;  // files whose tensors were (re)read from their headers
};

class CheckpointIndex {
 public:
  // index_path: empty for the cache location. Throws Error(BadInput) for an invalid checkpoint and for
  // an explicit index path that is not a Tensormorph index, Error(Io) when nothing can be opened.
  CheckpointIndex(const std::string& checkpoint_path, const std::string& index_path);
  ~CheckpointIndex();
  CheckpointIndex(const CheckpointIndex&) = delete;
  CheckpointIndex& operator=(const CheckpointIndex&) = delete;

  const Checkpoint& checkpoint() const { return checkpoint_; }
  const IndexOpenReport& report() const { return report_; }
  // The checkpoint's absolute path (what the index is keyed by).
  const std::string& checkpoint_path() const { return checkpoint_key_; }

  // Tensor i is checkpoint().tensors[i].
  bool has_stats(size_t i) const { return has_stats_[i]; }
  std::optional<StatsResult> load_stats(size_t i) const;
  // Stores tensor i's statistics, and its pyramid when given, in one transaction (durable once this
  // returns): a tensor with statistics has the pyramid indexing built with them.
  void store_stats(size_t i, const StatsResult& r, double seconds, const Pyramid* pyramid = nullptr);

  // Tensor i's stored pyramid without its tiles (layout and histogram edges), or nullopt.
  struct PyramidInfo {
    PyramidLayout layout;
    std::vector<double> edges;
  };
  std::optional<PyramidInfo> load_pyramid_info(size_t i) const;
  // One stored tile; nullopt when the tensor has no pyramid or no such tile. Throws BadInput for a
  // damaged record.
  std::optional<TileStats> load_tile(size_t i, const PyramidInfo& info, unsigned level, uint64_t slice, uint64_t ty,
                                     uint64_t tx) const;
  // The tiles [ty0, ty1) x [tx0, tx1) of one level and slice, row-major, in one query. Throws BadInput
  // when any is missing or damaged.
  std::vector<TileStats> load_tiles(size_t i, const PyramidInfo& info, unsigned level, uint64_t slice, uint64_t ty0,
                                    uint64_t ty1, uint64_t tx0, uint64_t tx1) const;

  // The options every indexed statistic is computed with (histogram of 256 bins over the finite
  // min..max; quantiles 0.001, 0.01, 0.5, 0.99, 0.999), threads and memory budget aside.
  static StatsOptions index_options();

 private:
  void open_database(const std::string& path, bool explicit_path);
  bool load_if_unchanged(const std::string& layout);
  void reconcile(const std::string& checkpoint_path, const std::string& layout);
  void load_stats_presence();
  void store_pyramid(size_t i, const Pyramid& p);  // inside store_stats' transaction

  std::unique_ptr<SqliteDb> db_;
  std::string checkpoint_key_;  // absolute path of the checkpoint
  Checkpoint checkpoint_;
  std::vector<int64_t> tensor_ids_;
  std::vector<bool> has_stats_;
  IndexOpenReport report_;
};

// The database path used when no --index is given.
std::string default_index_path(const std::string& checkpoint_path);

}  // namespace tmorph
