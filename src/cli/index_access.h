// How commands reach a checkpoint through its index: open (or build) the index, report where it lives
// when it cannot be saved, and compute what it lacks with a progress bar on a terminal.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "app/indexing.h"
#include "app/runtime.h"
#include "index/checkpoint_index.h"
#include "index/indexer.h"

namespace tmorph::cli {

using app::Runtime;
using app::open_index;  // PATH's index, its warning on stderr (app/indexing.h)

// Adds --index PATH to a subcommand.
void add_index_option(CLI::App* cmd, std::string& index_path);

// Computes and commits the statistics the index lacks (of `only`, or of every tensor). The progress
// bar shows on stderr when it is a terminal and `quiet` is false. Indexing's memory budget is 1 GiB
// unless --memory-budget or compute.memory_budget says otherwise.
// `pyramids`: build statistics pyramids with the statistics (index --no-pyramid turns them off).
// max_bytes_per_s: the average read rate (index --max-read-rate; per rank across MPI ranks), 0: unlimited.
IndexingReport fill_index(CheckpointIndex& index, const Runtime& rt, const std::vector<size_t>& only, bool quiet,
                          bool pyramids = true, uint64_t max_bytes_per_s = 0);

}  // namespace tmorph::cli
