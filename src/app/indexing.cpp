#include "app/indexing.h"

namespace tmorph::app {

IndexingOptions indexing_options(const Runtime& rt, const std::vector<size_t>& only, bool pyramids) {
  IndexingOptions opt;
  opt.threads = rt.threads;
  opt.memory_budget = rt.memory_budget_set ? rt.memory_budget : uint64_t{1} << 30;
  opt.only = only;
  opt.pyramids = pyramids;
  return opt;
}

}  // namespace tmorph::app
