// The difference index: a SQLite database (its own, beside the checkpoint indexes) holding the difference
// pyramids of one pair of checkpoints, keyed by both checkpoints' file identities (size, mtime and header hash
// of every file, core/file_identity.h). When any identity changed since the pyramids were stored, they are
// dropped and built again; otherwise a stored pair's pyramid is read back instead of reading the tensors.
//
// Where: --index PATH, else $XDG_CACHE_HOME/tensormorph/diff/<A name>-vs-<B name>-<hash of both absolute
// paths>.sqlite. When that location cannot be written, the pyramids live in memory for this run and the report
// says so.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "checkpoint/checkpoint.h"
#include "diff/diff_pyramid.h"

namespace tmorph {

class SqliteDb;

struct DiffStoreReport {
  std::string database;       // the file, or ":memory:"
  bool persisted = true;      // false: this run's pyramids are not saved
  std::string warning;        // why not, or what was dropped
};

// The text both checkpoints' identities are keyed by: every file's path, size, mtime and header hash.
std::string checkpoints_identity(const Checkpoint& a, const Checkpoint& b);

// The database path used when no --index is given.
std::string default_diff_index_path(const std::string& a_path, const std::string& b_path);

class DiffStore {
 public:
  // index_path empty: the cache location. Throws BadInput for an explicit path that is not a difference index
  // (or belongs to another pair of checkpoints: InvalidArgument).
  DiffStore(const std::string& index_path, const std::string& a_path, const std::string& b_path, const std::string& identity);
  ~DiffStore();
  DiffStore(const DiffStore&) = delete;
  DiffStore& operator=(const DiffStore&) = delete;

  // The stored pyramid of the pair (name_a, name_b) read in `rows` order ("stored" or "unpermuted") over `view`;
  // nullopt when none is stored. Throws BadInput naming the database and pair for a damaged record.
  std::optional<DiffPyramid> load(const std::string& name_a, const std::string& name_b, const std::string& rows,
                                  const View2D& view) const;
  // Stores it in one transaction (replacing an earlier one).
  void store(const std::string& name_a, const std::string& name_b, const std::string& rows, const DiffPyramid& p);
  const DiffStoreReport& report() const { return report_; }

 private:
  std::unique_ptr<SqliteDb> db_;
  DiffStoreReport report_;
};

}  // namespace tmorph
