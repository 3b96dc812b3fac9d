#include "tensormorph/cost_model.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/json_bounded.h"
#include "core/json_file.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/error.h"

namespace tmorph {

std::string CostModel::key(const std::string& backend, const std::string& device_id, tm_op op) {
  return backend + "|" + device_id + "|" + op_name(op);
}

bool CostModel::calibrated_any(const std::string& backend, tm_op op) const {
  const std::string prefix = backend + "|", suffix = "|" + op_name(op);
  for (auto it = throughput_.lower_bound(prefix); it != throughput_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it)
    if (it->first.size() >= suffix.size() && it->first.compare(it->first.size() - suffix.size(), suffix.size(), suffix) == 0)
      return true;
  return false;
}

void CostModel::set_throughput(const std::string& backend, const std::string& device_id, tm_op op,
                               double bytes_per_s) {
  throughput_[key(backend, device_id, op)] = bytes_per_s;
}

double CostModel::throughput(const std::string& backend, const std::string& device_id, tm_op op,
                             bool* calibrated) const {
  auto it = throughput_.find(key(backend, device_id, op));
  if (calibrated) *calibrated = it != throughput_.end();
  return it == throughput_.end() ? kDefaultThroughput : it->second;
}

void CostModel::load(const std::string& path) {
  const auto doc = read_json_file(path);
  if (!doc) return;
  try {
    for (const auto& e : doc->at("throughput")) {
      const tm_op op = parse_op(e.at("op").get<std::string>());
      const double bps = e.at("bytes_per_s").get<double>();
      if (op == TM_OP_INVALID || !(bps > 0))
        throw Error(ErrorKind::BadInput, path + ": entry " + json_brief(e) + " has an unknown op or a non-positive bytes_per_s");
      set_throughput(e.at("backend").get<std::string>(), e.at("device_id").get<std::string>(), op, bps);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::BadInput, path + ": not a calibration file (" + std::string(e.what()) +
                                         "); delete it or run 'tensormorph calibrate'");
  }
}

void CostModel::save(const std::string& path) const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [k, v] : throughput_) {
    std::stringstream parts(k);
    std::string backend, device, op;
    std::getline(parts, backend, '|');
    std::getline(parts, device, '|');
    std::getline(parts, op, '|');
    list.push_back({{"backend", backend}, {"device_id", device}, {"op", op}, {"bytes_per_s", v}});
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::ofstream out(path, std::ios::trunc);
  if (!out) throw Error(ErrorKind::Io, path + ": cannot write calibration");
  out << nlohmann::json{{"version", 1}, {"throughput", list}}.dump(2) << "\n";
}

}  // namespace tmorph
