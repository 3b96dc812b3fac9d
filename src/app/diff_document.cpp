#include "app/diff_document.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "app/result_json.h"
#include "core/json_number.h"
#include "tensormorph/error.h"

namespace tmorph::app {

namespace {

nlohmann::json tiles_json(const DiffPyramid& p, unsigned level) {
  const PyramidLayout& l = p.layout;
  if (level >= l.levels.size())
    throw Error(ErrorKind::InvalidArgument, "--level " + std::to_string(level) + ": the difference pyramid has levels 0 to " +
                                                std::to_string(l.levels.size() - 1));
  const auto& g = l.levels[level];
  nlohmann::json tiles = nlohmann::json::array();
  for (uint64_t s = 0; s < l.view.slices; ++s)
    for (uint64_t ty = 0; ty < g.rows; ++ty)
      for (uint64_t tx = 0; tx < g.cols; ++tx) {
        const TileRange r = l.range(level, ty, tx);
        nlohmann::json t = diff_stats_json(p.tile(level, s, ty, tx), &p.edges);
        t.update({{"slice", s}, {"ty", ty}, {"tx", tx}, {"row_begin", r.row_begin}, {"row_end", r.row_end},
                  {"col_begin", r.col_begin}, {"col_end", r.col_end}});
        tiles.push_back(std::move(t));
      }
  return {{"level", level}, {"rows", g.rows}, {"cols", g.cols}, {"tiles", tiles}};
}

// Largest first, NaN last; ties in the given order.
void rank(std::vector<std::pair<double, nlohmann::json>>& rows, size_t top, nlohmann::json& out) {
  std::stable_sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) {
    if (std::isnan(x.first) != std::isnan(y.first)) return std::isnan(y.first);
    return x.first > y.first;
  });
  out = nlohmann::json::array();
  for (size_t i = 0; i < rows.size() && i < top; ++i) out.push_back(rows[i].second);
}

}  // namespace

nlohmann::json diff_document(const CheckpointDiff& d, const DiffDocumentOptions& options) {
  nlohmann::json pairs = nlohmann::json::array();
  std::vector<std::pair<double, nlohmann::json>> tensor_rows;
  struct LayerSums {
    DiffTileStats all;
    size_t tensors = 0;
  };
  std::map<uint64_t, LayerSums> layers;
  for (const PairDiff& p : d.pairs) {
    const DiffTileStats& s = p.summary;
    const PyramidLayout& l = p.pyramid.layout;
    nlohmann::json j = {{"name", p.name_a}, {"name_b", p.name_b}, {"type_a", p.type_a}, {"type_b", p.type_b},
                        {"shape", p.shape}, {"layer", p.layer ? nlohmann::json(*p.layer) : nlohmann::json()},
                        {"translated", p.translated}, {"rows", p.qk && p.qk->unpermute ? "unpermuted" : "stored"},
                        {"view", view_spec(l.view)}, {"tile_rows", l.tile_rows}, {"tile_cols", l.tile_cols},
                        {"levels", l.levels.size()}, {"difference", diff_stats_json(s, &p.pyramid.edges)},
                        {"reused", p.reused}, {"seconds", p.seconds}, {"placement", placements_json(p.placement)}};
    if (p.qk)
      j["qk_permutation"] = {{"heads", p.qk->heads}, {"sample_rows", p.qk->sample_rows},
                             {"sum_sq_delta_as_stored", json_number(p.qk->sum_sq_as_stored)},
                             {"sum_sq_delta_unpermuted", json_number(p.qk->sum_sq_unpermuted)}, {"verdict", p.qk->verdict}};
    else if (!p.qk_unchecked.empty())
      j["qk_permutation"] = {{"unchecked", p.qk_unchecked}};
    if (options.level) j["tiles"] = tiles_json(p.pyramid, *options.level);
    const double fraction = s.count ? static_cast<double>(s.changed) / static_cast<double>(s.count) : 0.0;
    tensor_rows.push_back({s.rel_change(), {{"name", p.name_a}, {"layer", j["layer"]}, {"rel_change", json_number(s.rel_change())},
                                            {"changed_fraction", json_number(fraction)}}});
    if (p.layer) {
      LayerSums& ls = layers[*p.layer];
      DiffTileStats no_hist = s;
      no_hist.hist.clear();
      merge_into(ls.all, no_hist);
      ++ls.tensors;
    }
    pairs.push_back(std::move(j));
  }
  std::vector<std::pair<double, nlohmann::json>> layer_rows;
  nlohmann::json strip = nlohmann::json::array();
  for (const auto& [layer, ls] : layers) {
    const double rel = ls.all.rel_change();
    const double fraction = ls.all.count ? static_cast<double>(ls.all.changed) / static_cast<double>(ls.all.count) : 0.0;
    layer_rows.push_back({rel, {{"layer", layer}, {"rel_change", json_number(rel)}, {"changed_fraction", json_number(fraction)},
                                {"tensors", ls.tensors}}});
    strip.push_back({{"layer", layer}, {"rel_change", json_number(rel)}});
  }
  nlohmann::json ranking = nlohmann::json::object();
  rank(tensor_rows, options.top, ranking["tensors"]);
  rank(layer_rows, options.top, ranking["layers"]);
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& s : d.skipped) skipped.push_back({{"name", s.name}, {"reason", s.reason}});
  nlohmann::json index = {{"database", d.store.database}, {"persisted", d.store.persisted}};
  if (!d.store.warning.empty()) index["warning"] = d.store.warning;
  nlohmann::json adapter;  // null unless B is a PEFT LoRA adapter
  if (d.adapter)
    adapter = {{"rank", d.adapter->rank}, {"alpha", json_number(d.adapter->alpha)}, {"scale", json_number(d.adapter->scale)},
               {"use_rslora", d.adapter->rslora}, {"fan_in_fan_out", d.adapter->fan_in_fan_out},
               {"target_modules", d.adapter->target_modules}};
  return {{"a", d.a}, {"b", d.b}, {"adapter", adapter}, {"format_a", d.format_a}, {"format_b", d.format_b}, {"name_mapping", d.mapping},
          {"index", index}, {"pairs", pairs}, {"ranking", ranking}, {"layer_strip", strip},
          {"only_in_a", d.only_in_a}, {"only_in_b", d.only_in_b}, {"skipped", skipped}};
}

}  // namespace tmorph::app
