// A checkpoint's index as every face opens it, and indexing options as every face builds them from the
// runtime (CLI `index`/`stats`/`ls`/`render`, the server's start-up and jobs).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/runtime.h"
#include "index/checkpoint_index.h"
#include "index/indexer.h"

namespace tmorph::app {

// Opens (or builds) PATH's index at index_path, or at the cache location when empty. Its warning (e.g. an
// index that cannot be saved, and where it lives instead) goes to stderr as "tensormorph: warning: …".
std::unique_ptr<CheckpointIndex> open_index(const std::string& path, const std::string& index_path);

// The runtime's threads, and a memory budget of 1 GiB unless --memory-budget or compute.memory_budget
// says otherwise; `only` the tensors to compute (empty: every one), `pyramids` whether to build them.
// No progress callback (a face adds its own).
IndexingOptions indexing_options(const Runtime& rt, const std::vector<size_t>& only, bool pyramids);

// The document `index --json` prints and tm.Checkpoint.index() returns: {path, database, persisted, warning, reused,
// reindexed_files, tensors, computed, already_indexed, unavailable, bytes, seconds, bytes_per_second, workers,
// window_bytes, readahead_bytes, ranks}.
nlohmann::json indexing_report_json(const std::string& path, const CheckpointIndex& index, const IndexingReport& r);

}  // namespace tmorph::app
