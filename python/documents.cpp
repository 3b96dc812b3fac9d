#include "documents.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "app/backends_json.h"
#include "app/checkpoint_json.h"
#include "app/indexing.h"
#include "app/stats_document.h"
#include "checkpoint/openers/open_checkpoint.h"
#include "compute_args.h"
#include "index/checkpoint_index.h"
#include "index/indexer.h"
#include "tensormorph/error.h"

namespace tmorph::python {

nlohmann::json backends_document(const app::ComputeRequest& request) {
  auto rt = make_runtime(request);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& b : rt->registry.backends()) list.push_back(app::backend_json(b));
  return list;
}

namespace {

bool unconstrained(const app::ComputeRequest& r) {
  return r.backend.empty() && r.prefer.empty() && r.never.empty() && r.allow_approx.empty();
}

}  // namespace

nlohmann::json stats_document(const std::string& path, const std::vector<std::string>& names,
                              const app::ComputeRequest& request, const IndexingHook& hook, app::RemoteCheckpoint* remote) {
  auto rt = make_runtime(request);
  const Planner planner = rt->planner();
  app::StatsDocumentRequest req;
  req.path = path;
  req.tensors = names;
  // The same rule as the CLI: the indexed statistics serve a request without placement constraints.
  req.from_index = unconstrained(request);
  req.options.threads = rt->threads;
  req.options.memory_budget_bytes = rt->memory_budget;
  req.options.allowed_approx_steps = {request.allow_approx.begin(), request.allow_approx.end()};
  req.open_index = [&] { return app::open_index(path, ""); };
  req.fill_index = [&](CheckpointIndex& index, const std::vector<size_t>& selected) {
    IndexingOptions options = app::indexing_options(*rt, selected, true);
    if (hook) hook(options);
    const app::FetchedTensors fetched(remote, index.checkpoint(), selected);
    return !index_checkpoint(index, planner, options).cancelled;
  };
  // Statistics computed for this call (placement constraints): the named tensors' bytes (every tensor's when none
  // is named) first.
  std::optional<Checkpoint> opened;
  std::optional<app::FetchedTensors> fetched;
  if (remote && !req.from_index) {
    opened = open_checkpoint(path);
    std::vector<size_t> which;
    for (size_t i = 0; i < opened->tensors.size(); ++i)
      if (names.empty() || std::find(names.begin(), names.end(), opened->tensors[i].name) != names.end()) which.push_back(i);
    fetched.emplace(remote, *opened, which);
  }
  const app::StatsDocument doc = app::build_stats_document(req, planner);
  if (doc.cancelled()) return nullptr;
  doc.refuse_if_unserved(rt->constraints.strict_backend);
  return doc.json();
}

nlohmann::json index_document(const std::string& path, const app::ComputeRequest& request, const IndexingHook& hook,
                              app::RemoteCheckpoint* remote) {
  auto rt = make_runtime(request);
  auto index = app::open_index(path, "");
  const Planner planner = rt->planner();
  const auto fill = [&](const std::vector<size_t>& only) {
    IndexingOptions options = app::indexing_options(*rt, only, true);
    if (hook) hook(options);
    return index_checkpoint(*index, planner, options);
  };
  if (!remote) {
    const IndexingReport r = fill({});
    return r.cancelled ? nullptr : app::indexing_report_json(path, *index, r);
  }
  const IndexingReport sum = app::index_remote(*index, *remote, app::indexing_options(*rt, {}, true).memory_budget, fill);
  if (sum.cancelled) return nullptr;
  return app::indexing_report_json(path, *index, app::remote_indexing_report(fill({}), sum));
}

namespace {

// PATH's index with tensor `name`'s statistics and pyramid computed (as the CLI's render and tile do); its
// position in *position. Null when the hook's cancel flag stopped the indexing.
// A remote tensor's bytes are fetched into *fetched when `values` asks for them or the index lacks its statistics.
// *fetched refers to the returned index's checkpoint: the caller declares it after the index, so it goes first.
std::unique_ptr<CheckpointIndex> indexed_for(const std::string& path, const std::string& name, const app::Runtime& rt,
                                             const IndexingHook& hook, size_t* position, app::RemoteCheckpoint* remote,
                                             bool values, std::optional<app::FetchedTensors>* fetched) {
  auto index = app::open_index(path, "");
  *position = index->checkpoint().position(name, path);
  IndexingOptions options = app::indexing_options(rt, {*position}, true);
  if (hook) hook(options);
  if (remote && (values || !index->has_stats(*position))) fetched->emplace(remote, index->checkpoint(), std::vector<size_t>{*position});
  if (index_checkpoint(*index, rt.planner(), options).cancelled) {
    fetched->reset();  // released while the index it reads is alive
    return nullptr;
  }
  return index;
}

}  // namespace

RenderDocument render_document(const std::string& path, const std::string& name, const TensorRenderRequest& render,
                               const app::ComputeRequest& request, const IndexingHook& hook, app::RemoteCheckpoint* remote) {
  auto rt = make_runtime(request);
  size_t i = 0;
  std::unique_ptr<CheckpointIndex> index;
  std::optional<app::FetchedTensors> fetched;  // level-0 cells may be drawn from the values
  index = indexed_for(path, name, *rt, hook, &i, remote, true, &fetched);
  if (!index) return {};
  TensorRender r = render_tensor(*index, i, rt->planner(), render);
  return {std::move(r.image.image), std::move(r.report)};
}

nlohmann::json tile_document(const std::string& path, const std::string& name, unsigned level, uint64_t slice, uint64_t x,
                             uint64_t y, const app::ComputeRequest& request, const IndexingHook& hook,
                             app::RemoteCheckpoint* remote) {
  auto rt = make_runtime(request);
  size_t i = 0;
  std::unique_ptr<CheckpointIndex> index;
  std::optional<app::FetchedTensors> fetched;
  index = indexed_for(path, name, *rt, hook, &i, remote, false, &fetched);
  if (!index) return nullptr;
  return tmorph::tile_document(*index, i, level, slice, x, y);
}


}  // namespace tmorph::python
