#include "app/indexing.h"

#include <cstdio>

namespace tmorph::app {

std::unique_ptr<CheckpointIndex> open_index(const std::string& path, const std::string& index_path) {
  auto index = std::make_unique<CheckpointIndex>(path, index_path);
  if (!index->report().warning.empty()) std::fprintf(stderr, "tensormorph: warning: %s\n", index->report().warning.c_str());
  return index;
}

IndexingOptions indexing_options(const Runtime& rt, const std::vector<size_t>& only, bool pyramids) {
  IndexingOptions opt;
  opt.threads = rt.threads;
  opt.memory_budget = rt.memory_budget_set ? rt.memory_budget : uint64_t{1} << 30;
  opt.only = only;
  opt.pyramids = pyramids;
  return opt;
}

}  // namespace tmorph::app
