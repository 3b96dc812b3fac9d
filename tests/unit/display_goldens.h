// Reading the display goldens (tests/goldens/display/, written by tests/tools/display_goldens.py with
// numpy + matplotlib): cases.json holds the inputs and requests, <map>.json the expected RGBA bytes (hex,
// "rrggbbaa" per input) and histogram counts per case.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "display/display_kernels.h"
#include "display/transform.h"

namespace tmorph::test {

// tests/goldens/display/<name>.json ("cases" or a colour map's name).
inline nlohmann::json load_display_golden(const std::string& name) {
  const std::string path = std::string(TM_GOLDENS_DIR) + "/display/" + name + ".json";
  std::ifstream f(path);
  if (!f) throw std::runtime_error("cannot open " + path);
  std::stringstream s;
  s << f.rdbuf();
  return nlohmann::json::parse(s.str());
}

// A golden input: a JSON number, or "nan", "inf", "-inf".
inline double golden_value(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string s = j.get<std::string>();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  throw std::runtime_error("bad golden value " + s);
}

inline std::vector<double> golden_values(const nlohmann::json& c) {
  std::vector<double> v;
  for (const auto& x : c["values"]) v.push_back(golden_value(x));
  return v;
}

// The display request of a golden case with colour map `map` (a missing limit is automatic).
inline DisplayRequest golden_request(const nlohmann::json& c, std::string_view map) {
  DisplayRequest req;
  req.transform = parse_transform(c["transform"].get<std::string>());
  req.log_floor = c["log_floor"].get<double>();
  if (!c["lo"].is_null()) req.lo = c["lo"].get<double>();
  if (!c["hi"].is_null()) req.hi = c["hi"].get<double>();
  req.colormap = map;
  return req;
}

// Bytes as lower-case hex, the goldens' RGBA notation.
inline std::string hex_bytes(const uint8_t* b, size_t n) {
  std::string out;
  char buf[3];
  for (size_t i = 0; i < n; ++i) std::snprintf(buf, sizeof buf, "%02x", b[i]), out += buf;
  return out;
}

}  // namespace tmorph::test
