#include "documents.h"

#include <memory>
#include <optional>

#include "app/backends_json.h"
#include "app/checkpoint_json.h"
#include "app/indexing.h"
#include "checkpoint/tensor_stats.h"
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

size_t tensor_position(const Checkpoint& c, const std::string& path, const std::string& name) {
  for (size_t i = 0; i < c.tensors.size(); ++i)
    if (c.tensors[i].name == name) return i;
  throw Error(ErrorKind::InvalidArgument, path + ": no tensor named '" + name + "'");
}

bool unconstrained(const app::ComputeRequest& r) {
  return r.backend.empty() && r.prefer.empty() && r.never.empty() && r.allow_approx.empty();
}

}  // namespace

nlohmann::json stats_document(const std::string& path, const std::vector<std::string>& names,
                              const app::ComputeRequest& request, const IndexingHook& hook) {
  auto rt = make_runtime(request);
  // The same rule as the CLI: the indexed statistics serve a request without placement constraints.
  const bool from_index = unconstrained(request);
  std::unique_ptr<CheckpointIndex> index;
  std::optional<Checkpoint> direct;
  if (from_index) index = app::open_index(path, "");
  else direct = open_checkpoint(path);
  const Checkpoint& c = from_index ? index->checkpoint() : *direct;
  std::vector<size_t> selected;
  for (const auto& name : names) selected.push_back(tensor_position(c, path, name));
  if (names.empty())
    for (size_t i = 0; i < c.tensors.size(); ++i) selected.push_back(i);
  const Planner planner = rt->planner();
  if (from_index) {
    IndexingOptions options = app::indexing_options(*rt, selected, true);
    if (hook) hook(options);
    if (index_checkpoint(*index, planner, options).cancelled) return nullptr;
  }
  StatsOptions opt;
  opt.threads = rt->threads;
  opt.memory_budget_bytes = rt->memory_budget;
  opt.allowed_approx_steps = {request.allow_approx.begin(), request.allow_approx.end()};

  nlohmann::json list = nlohmann::json::array();
  size_t unavailable = 0;
  for (size_t i : selected) {
    const CheckpointTensor& t = c.tensors[i];
    nlohmann::json e = app::tensor_entry_json(t);
    if (const auto why = unreadable_reason(t, planner)) {
      e["stats"] = nullptr;
      e["unavailable"] = *why;
      ++unavailable;
      list.push_back(e);
      continue;
    }
    std::optional<StatsResult> stored;
    if (from_index) stored = index->load_stats(i);
    if (from_index && !stored) throw Error(ErrorKind::Internal, t.name + ": statistics missing from the index after indexing");
    // Approximate quantiles in the index were consented to elsewhere (the viewer): computed again here.
    if (stored && !stored->quantiles_exact && !stored->quantiles.empty()) stored.reset();
    const bool served_from_index = stored.has_value();
    const StatsResult r = stored ? std::move(*stored) : compute_tensor_stats(c, t, planner, opt);
    app::add_tensor_stats_json(e, c, t, r, served_from_index);
    list.push_back(e);
  }
  if (!rt->constraints.strict_backend.empty() && unavailable)
    throw Error(ErrorKind::Unavailable, std::to_string(unavailable) + " of " + std::to_string(selected.size()) +
                                            " tensors could not be served by --backend " + rt->constraints.strict_backend +
                                            " (each reported with its reason); nothing was substituted");
  return {{"file", path}, {"format", c.format}, {"tensors", list}};
}

nlohmann::json index_document(const std::string& path, const app::ComputeRequest& request, const IndexingHook& hook) {
  auto rt = make_runtime(request);
  auto index = app::open_index(path, "");
  IndexingOptions options = app::indexing_options(*rt, {}, true);
  if (hook) hook(options);
  const IndexingReport r = index_checkpoint(*index, rt->planner(), options);
  if (r.cancelled) return nullptr;
  return app::indexing_report_json(path, *index, r);
}

namespace {

// PATH's index with tensor `name`'s statistics and pyramid computed (as the CLI's render and tile do); its
// position in *position. Null when the hook's cancel flag stopped the indexing.
std::unique_ptr<CheckpointIndex> indexed_for(const std::string& path, const std::string& name, const app::Runtime& rt,
                                             const IndexingHook& hook, size_t* position) {
  auto index = app::open_index(path, "");
  *position = tensor_position(index->checkpoint(), path, name);
  IndexingOptions options = app::indexing_options(rt, {*position}, true);
  if (hook) hook(options);
  if (index_checkpoint(*index, rt.planner(), options).cancelled) return nullptr;
  return index;
}

}  // namespace

RenderDocument render_document(const std::string& path, const std::string& name, const TensorRenderRequest& render,
                               const app::ComputeRequest& request, const IndexingHook& hook) {
  auto rt = make_runtime(request);
  size_t i = 0;
  const auto index = indexed_for(path, name, *rt, hook, &i);
  if (!index) return {};
  TensorRender r = render_tensor(*index, i, rt->planner(), render);
  return {std::move(r.image.image), std::move(r.report)};
}

nlohmann::json tile_document(const std::string& path, const std::string& name, unsigned level, uint64_t slice, uint64_t x,
                             uint64_t y, const app::ComputeRequest& request, const IndexingHook& hook) {
  auto rt = make_runtime(request);
  size_t i = 0;
  const auto index = indexed_for(path, name, *rt, hook, &i);
  if (!index) return nullptr;
  return tmorph::tile_document(*index, i, level, slice, x, y);
}


}  // namespace tmorph::python
