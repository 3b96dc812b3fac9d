// The one rule for floating-point numbers in the JSON documents tensormorph writes (`--json` of the CLI,
// the HTTP API, placement records): JSON has no NaN or infinity, so a finite double is a JSON number and
// a non-finite one is the string "nan", "inf" or "-inf" (lossless: the sign of an infinity is kept, and
// a NaN is never confused with a missing value, which is null). Counts are not doubles: they stay JSON
// integers, and what must be exact beyond 2^53 (integer sums) is a decimal string.
//
// Header-only and in core because layers below the application layer write documents too (placement
// records in ops, tile statistics in render), and tm_core needs no new source file for it.
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

namespace tmorph {

inline nlohmann::json json_number(double v) {
  if (std::isfinite(v)) return v;
  if (std::isnan(v)) return "nan";  // any NaN, whatever its sign bit or payload
  return v > 0 ? "inf" : "-inf";
}

inline nlohmann::json json_numbers(const std::vector<double>& vs) {
  nlohmann::json a = nlohmann::json::array();
  for (double v : vs) a.push_back(json_number(v));
  return a;
}

// The inverse: a JSON number, or "nan", "inf", "-inf", back to the double; nullopt for anything else.
inline std::optional<double> number_from_json(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const auto& s = j.get_ref<const std::string&>();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return std::nullopt;
}

}  // namespace tmorph
