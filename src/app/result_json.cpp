#include "app/result_json.h"

#include "core/json_number.h"

namespace tmorph::app {

nlohmann::json moments_json(const MomentsSummary& m) {
  nlohmann::json j = {{"count", m.count},
                      {"finite_count", m.finite_count},
                      {"nan_count", m.nan_count},
                      {"inf_count", m.inf_count},
                      {"zero_count", m.zero_count},
                      {"min", json_number(m.min)},
                      {"max", json_number(m.max)},
                      {"abs_max", json_number(m.abs_max)},
                      {"sum", json_number(m.sum)},
                      {"mean", json_number(m.mean)},
                      {"std", json_number(m.std)}};
  if (m.is_integer) j["exact"] = {{"min", m.int_min}, {"max", m.int_max}, {"sum", m.int_sum}};
  return j;
}

nlohmann::json stats_json(const StatsResult& r) {
  nlohmann::json j = moments_json(r.moments);
  if (r.histogram)
    j["histogram"] = {{"edges", json_numbers(r.histogram->edges)},
                      {"counts", r.histogram->counts},
                      {"below", r.histogram->below},
                      {"above", r.histogram->above}};
  if (!r.quantiles.empty()) {
    nlohmann::json qs = nlohmann::json::array();
    for (const auto& q : r.quantiles) {
      nlohmann::json e = {{"p", json_number(q.p)}, {"value", json_number(q.value)}, {"sample_size", q.sample_size}};
      if (!r.quantiles_exact) e["lo"] = json_number(q.lo), e["hi"] = json_number(q.hi);
      qs.push_back(e);
    }
    j["quantiles"] = {{"method", r.quantile_method}, {"exact", r.quantiles_exact}, {"values", qs}};
  }
  return j;
}

nlohmann::json quantization_stats_json(const QuantizationStats& q) {
  nlohmann::json j = {{"bits_per_weight", json_number(q.bits_per_weight)},
                      {"block_scales", q.scales ? stats_json(*q.scales) : nlohmann::json(nullptr)},
                      {"block_mins", q.mins ? stats_json(*q.mins) : nlohmann::json(nullptr)},
                      {"code_bits", q.code_bits},
                      {"placement", placements_json(q.placement)}};
  if (q.code_bits) {
    j["code_counts"] = q.code_counts;
    j["saturated_fraction"] = json_number(q.codes ? static_cast<double>(q.saturated) / static_cast<double>(q.codes) : 0.0);
  } else {
    j["code_counts"] = nullptr;  // lattice indices or split bit planes: not counted (op_contracts.h)
  }
  return j;
}

nlohmann::json compare_json(const TensorDiff& d) {
  return {{"count", d.count},
          {"nonfinite", d.nonfinite},
          {"rmse", json_number(d.rmse)},
          {"max_abs_diff", json_number(d.max_abs)},
          {"rel_error", json_number(d.rel_error)},
          {"cosine", json_number(d.cosine)},
          {"snr_db", json_number(d.snr_db)},
          {"placement", placements_json(d.placement)}};
}

nlohmann::json diff_stats_json(const DiffTileStats& t, const std::vector<double>* edges) {
  const double finite = static_cast<double>(t.finite());
  nlohmann::json j = {{"count", t.count},
                      {"changed", t.changed},
                      {"changed_fraction", json_number(t.count ? static_cast<double>(t.changed) / static_cast<double>(t.count) : 0.0)},
                      {"nonfinite", t.nonfinite},
                      {"sum_delta", json_number(t.sum_delta.value())},
                      {"sum_sq_delta", json_number(t.sum_sq_delta.value())},
                      {"mean_delta", json_number(finite > 0 ? t.sum_delta.value() / finite : 0.0)},
                      {"max_abs_delta", json_number(t.max_abs)},
                      {"min_delta", json_number(t.min_delta)},
                      {"max_delta", json_number(t.max_delta)},
                      {"rel_change", json_number(t.rel_change())},
                      {"cosine", json_number(t.cosine())}};
  if (edges) j["histogram"] = {{"edges", json_numbers(*edges)}, {"counts", edges->empty() ? std::vector<uint64_t>{} : t.hist}};
  return j;
}

}  // namespace tmorph::app
