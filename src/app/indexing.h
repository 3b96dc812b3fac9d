// Indexing options as every face builds them from the runtime (CLI `index`/`stats`, the server's jobs).
#pragma once

#include <cstddef>
#include <vector>

#include "app/runtime.h"
#include "index/indexer.h"

namespace tmorph::app {

// The runtime's threads, and a memory budget of 1 GiB unless --memory-budget or compute.memory_budget
// says otherwise; `only` the tensors to compute (empty: every one), `pyramids` whether to build them.
// No progress callback (a face adds its own).
IndexingOptions indexing_options(const Runtime& rt, const std::vector<size_t>& only, bool pyramids);

}  // namespace tmorph::app
