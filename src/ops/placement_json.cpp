#include "ops/placement_json.h"

#include "core/json_number.h"

namespace tmorph {

nlohmann::json placement_json(const Placement& p) {
  nlohmann::json rejected = nlohmann::json::array();
  for (const auto& r : p.rejected)
    rejected.push_back({{"backend", r.backend}, {"device", r.device}, {"reason", r.reason}, {"detail", r.detail}});
  nlohmann::json j = {{"op", p.op},
                      {"backend", p.backend},
                      {"device", p.device},
                      {"device_kind", p.device_kind},
                      {"software_adapter", p.software_adapter},
                      {"reason", p.reason},
                      {"precision", p.precision},
                      {"approx_step", p.approx_step.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.approx_step)},
                      {"consent", p.consent.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.consent)},
                      {"estimated_seconds", json_number(p.estimated_seconds)},
                      {"throughput_calibrated", p.throughput_calibrated},
                      {"bytes_transferred", p.bytes_transferred},
                      {"rejected", rejected}};
  if (!p.split.empty()) {
    // A split op (Placement::split): each backend's share, planned and measured.
    nlohmann::json shares = nlohmann::json::array();
    for (const auto& sh : p.split)
      shares.push_back({{"backend", sh.placement.backend},
                        {"device", sh.placement.device},
                        {"device_kind", sh.placement.device_kind},
                        {"software_adapter", sh.placement.software_adapter},
                        {"fraction", json_number(sh.fraction)},
                        {"estimated_seconds", json_number(sh.placement.estimated_seconds)},
                        {"throughput_calibrated", sh.placement.throughput_calibrated},
                        {"bytes_transferred", sh.placement.bytes_transferred},
                        {"units", sh.units},
                        {"bytes", sh.bytes},
                        {"seconds", json_number(sh.seconds)},
                        {"failed", sh.failed.empty() ? nlohmann::json(nullptr) : nlohmann::json(sh.failed)},
                        {"handed_to", sh.handed_to.empty() ? nlohmann::json(nullptr) : nlohmann::json(sh.handed_to)}});
    j["split"] = std::move(shares);
    j["split_why"] = p.split_why;
  }
  return j;
}

nlohmann::json placements_json(const std::vector<Placement>& ps) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : ps) a.push_back(placement_json(p));
  return a;
}

std::vector<Placement> placements_from_json(const nlohmann::json& j) {
  std::vector<Placement> out;
  if (!j.is_array()) return out;
  for (const auto& e : j) {
    Placement p;
    p.op = e.value("op", "");
    p.backend = e.value("backend", "");
    p.device = e.value("device", "");
    p.device_kind = e.value("device_kind", "");
    p.software_adapter = e.value("software_adapter", false);
    p.reason = e.value("reason", "");
    p.precision = e.value("precision", "");
    if (e.contains("approx_step") && e["approx_step"].is_string()) p.approx_step = e["approx_step"];
    if (e.contains("consent") && e["consent"].is_string()) p.consent = e["consent"];
    if (e.contains("estimated_seconds")) p.estimated_seconds = number_from_json(e["estimated_seconds"]).value_or(0.0);
    p.throughput_calibrated = e.value("throughput_calibrated", false);
    p.bytes_transferred = e.value("bytes_transferred", uint64_t{0});
    if (e.contains("split") && e["split"].is_array()) {
      p.split_why = e.value("split_why", "");
      for (const auto& x : e["split"]) {
        SplitShare sh;
        sh.placement.op = p.op;
        sh.placement.backend = x.value("backend", "");
        sh.placement.device = x.value("device", "");
        sh.placement.device_kind = x.value("device_kind", "");
        sh.placement.software_adapter = x.value("software_adapter", false);
        sh.placement.precision = p.precision;
        sh.placement.reason = "split_share";
        if (x.contains("estimated_seconds")) sh.placement.estimated_seconds = number_from_json(x["estimated_seconds"]).value_or(0.0);
        sh.placement.throughput_calibrated = x.value("throughput_calibrated", false);
        sh.placement.bytes_transferred = x.value("bytes_transferred", uint64_t{0});
        if (x.contains("fraction")) sh.fraction = number_from_json(x["fraction"]).value_or(0.0);
        sh.units = x.value("units", uint64_t{0});
        sh.bytes = x.value("bytes", uint64_t{0});
        if (x.contains("seconds")) sh.seconds = number_from_json(x["seconds"]).value_or(0.0);
        if (x.contains("failed") && x["failed"].is_string()) sh.failed = x["failed"];
        if (x.contains("handed_to") && x["handed_to"].is_string()) sh.handed_to = x["handed_to"];
        p.split.push_back(std::move(sh));
      }
    }
    if (e.contains("rejected") && e["rejected"].is_array())
      for (const auto& r : e["rejected"])
        p.rejected.push_back({r.value("backend", ""), r.value("device", ""), r.value("reason", ""), r.value("detail", "")});
    out.push_back(std::move(p));
  }
  return out;
}

}  // namespace tmorph
