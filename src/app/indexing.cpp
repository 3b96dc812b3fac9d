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

nlohmann::json indexing_report_json(const std::string& path, const CheckpointIndex& index, const IndexingReport& r) {
  const IndexOpenReport& o = index.report();
  return {{"path", path},
          {"database", o.database},
          {"persisted", o.persisted},
          {"warning", o.warning.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.warning)},
          {"reused", o.reused},
          {"reindexed_files", o.reindexed_files},
          {"tensors", index.checkpoint().tensors.size()},
          {"computed", r.computed},
          {"already_indexed", r.already_indexed},
          {"unavailable", r.unavailable},
          {"damaged", r.damaged},
          {"bytes", r.bytes},
          {"seconds", r.seconds},
          {"bytes_per_second", r.seconds > 0 ? static_cast<double>(r.bytes) / r.seconds : 0.0},
          {"workers", r.workers},
          {"window_bytes", r.window_bytes},
          {"readahead_bytes", r.readahead_bytes},
          {"ranks", r.ranks}};
}

}  // namespace tmorph::app
