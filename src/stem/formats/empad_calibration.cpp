// EMPAD calibration from the sidecar's readings (empad_calibration.h).
#include "stem/formats/empad_calibration.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tmorph {

namespace {

constexpr const char* kIom = "root/iom_measurements/";

// The text of a kept element, or nullopt when the sidecar has none.
std::optional<std::string> text(const EmpadXml& x, const std::string& key) {
  if (!x.metadata.contains(key)) return std::nullopt;
  return x.metadata[key]["value"].get<std::string>();
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n'"), e = s.find_last_not_of(" \t\r\n'");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// A positive finite decimal number (C locale, optionally in single quotes), or nullopt.
std::optional<double> positive(const std::string& raw) {
  const std::string s = trim(raw);
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v) || !(v > 0)) return std::nullopt;
  return v;
}

struct Notes {
  std::vector<std::string> not_used;
  void bad(const std::string& key, const std::string& value, const std::string& expected) {
    not_used.push_back(key + " is '" + value + "': expected " + expected);
  }
};

// The first of `names` (under iom_measurements) the sidecar has, as a positive number: {value, path}.
std::optional<std::pair<double, std::string>> first_reading(const EmpadXml& x, const std::vector<std::string>& names,
                                                            const std::string& expected, Notes& notes) {
  for (const std::string& name : names) {
    const std::string key = kIom + name;
    const auto t = text(x, key);
    if (!t) continue;
    if (const auto v = positive(*t)) return std::make_pair(*v, key);
    notes.bad(key, *t, expected);
    return std::nullopt;  // the first present reading is the one meant; a later name is not a fallback for a bad one
  }
  return std::nullopt;
}

nlohmann::json sourced(double value, const char* units, const std::string& from) {
  return {{"value", value}, {"units", units}, {"from", from}};
}

// "[x, y]" (a Python list of two numbers, as the field of view is written) -> {x, y}, or nullopt.
std::optional<std::array<double, 2>> pair_of(const std::string& raw) {
  const std::string s = trim(raw);
  if (s.size() < 2 || (s.front() != '[' && s.front() != '(') || (s.back() != ']' && s.back() != ')')) return std::nullopt;
  const std::string inner = s.substr(1, s.size() - 2);
  const size_t comma = inner.find(',');
  if (comma == std::string::npos || inner.find(',', comma + 1) != std::string::npos) return std::nullopt;
  const auto a = positive(inner.substr(0, comma)), b = positive(inner.substr(comma + 1));
  if (!a || !b) return std::nullopt;
  return std::array<double, 2>{*a, *b};
}

void scan_step(Acquisition& a, const EmpadXml& x, Notes& notes) {
  const std::string fov_key = std::string(kIom) + "optics.get_full_scan_field_of_view";
  const auto fov_text = text(x, fov_key);
  if (!fov_text || !x.scan_x) return;  // no field of view, or a series (no 2-D scan)
  const auto fov = pair_of(*fov_text);
  if (!fov) return notes.bad(fov_key, *fov_text, "[x, y]: two positive numbers of metres");
  double fraction = 1;
  std::string fraction_from = " (root/scan_parameters/scan_size absent: the whole frame)";
  const std::string size_key = "root/scan_parameters/scan_size";
  if (const auto t = text(x, size_key)) {
    const auto f = positive(*t);
    if (!f) return notes.bad(size_key, *t, "a positive fraction of the scan frame");
    fraction = *f;
    fraction_from = " × " + size_key;
  }
  const double step_x = (*fov)[0] * fraction / static_cast<double>(*x.scan_x);
  const double step_y = (*fov)[1] * fraction / static_cast<double>(*x.scan_y);
  const std::string from_x = fov_key + "[0]" + fraction_from + " ÷ " + x.scan_x_path;
  const std::string from_y = fov_key + "[1]" + fraction_from + " ÷ " + x.scan_y_path;
  if (std::fabs(step_x - step_y) <= 1e-9 * std::max(step_x, step_y)) {
    a.metadata["empad/scan_step"] = sourced(step_x, "m", from_x);
    return;
  }
  a.metadata["empad/scan_step_x"] = sourced(step_x, "m", from_x);
  a.metadata["empad/scan_step_y"] = sourced(step_y, "m", from_y);
  char steps[96];
  std::snprintf(steps, sizeof steps, "%.6g m along x but %.6g m along y", step_x, step_y);
  notes.not_used.push_back(std::string("the scan step: ") + steps +
                           " (empad/scan_step_x, _y); the calibration takes one step: give --scan-step-A");
}

}  // namespace

void add_empad_calibration(Acquisition& a, const EmpadXml& x) {
  Notes notes;
  if (const auto v = first_reading(x, {"source.get_voltage", "high_voltage", "ColumnSourceHighVoltage"},
                                   "a positive number of volts", notes)) {
    a.beam_energy_ev = v->first;  // an electron through V volts gains V eV
    a.metadata["empad/beam_energy"] = sourced(v->first, "V", v->second);
  }
  if (const auto v = first_reading(x, {"calibrated_diffraction_angle"}, "a positive number of radians per pixel", notes))
    a.metadata["empad/detector_angle_per_pixel"] = sourced(v->first, "rad", v->second);
  if (const auto v = first_reading(x, {"optics.get_cameralength", "nominal_camera_length", "ColumnOpticsGetCameraLengthNominalCameraLength"},
                                   "a positive number of metres", notes))
    a.metadata["empad/camera_length"] = sourced(v->first, "m", v->second);
  scan_step(a, x, notes);
  if (!notes.not_used.empty()) {
    std::string all;
    for (const std::string& n : notes.not_used) all += (all.empty() ? "" : "; ") + n;
    a.metadata["empad/calibration_not_used"] = {{"value", all}};
  }
}

}  // namespace tmorph
