#include "stem/calibration.h"

#include "core/json_number.h"
#include "tensormorph/error.h"

namespace tmorph {

double electron_wavelength_A(double energy_ev) {
  constexpr double h = 6.62607015e-34, m0 = 9.1093837015e-31, e = 1.602176634e-19, c = 299792458.0;
  const double v = energy_ev;  // volts
  return h / std::sqrt(2 * m0 * e * v * (1 + e * v / (2 * m0 * c * c))) * 1e10;
}

namespace {

Sourced given(double value, const std::string& unit, const std::string& name) { return {value, unit, name, ""}; }

Sourced missing(const std::string& unit, const std::string& why) { return {NAN, unit, "", why}; }

std::string bins_text(const std::array<uint64_t, 2>& b) { return std::to_string(b[0]) + " x " + std::to_string(b[1]); }

}  // namespace

nlohmann::json to_json(const Sourced& s) {
  if (!s.known()) return {{"value", nullptr}, {"unit", s.unit}, {"missing", s.missing}};
  return {{"value", json_number(s.value)}, {"unit", s.unit}, {"source", s.source}};
}

const Sourced& require_positive(const Sourced& s, const std::string& what) {
  if (!s.known()) throw Error(ErrorKind::InvalidArgument, s.missing);
  if (!(s.value > 0) || !std::isfinite(s.value))
    throw Error(ErrorKind::InvalidArgument, "the " + what + " (" + s.source + ") must be a positive number");
  return s;
}

std::optional<Sourced> metadata_quantity(const Acquisition& acq, const std::string& suffix, const std::string& unit) {
  for (const auto& [path, entry] : acq.metadata.items()) {
    if (path.size() < suffix.size() || path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    if (!entry.is_object() || !entry.contains("value") || !entry["value"].is_number()) continue;
    const double v = entry["value"].get<double>();
    const std::string units = entry.value("units", "");
    double scale = 0;
    if (unit == "angstrom") scale = units == "angstrom" || units == "A" ? 1 : units == "nm" ? 10 : units == "m" ? 1e10 : 0;
    if (unit == "mrad") scale = units == "mrad" ? 1 : units == "rad" ? 1e3 : 0;
    if (scale == 0) continue;
    // An opener that derived the value records what from ("from": the file's own fields), shown in the source.
    const std::string from = entry.contains("from") && entry["from"].is_string() ? " (from " + entry["from"].get<std::string>() + ")" : "";
    return given(v * scale, unit, "file: " + path + from);
  }
  return std::nullopt;
}

Sourced beam_energy_ev(const Acquisition& acq, const Override& o) {
  if (o.value) return given(*o.value, "eV", o.name);
  if (acq.beam_energy_ev) return given(*acq.beam_energy_ev, "eV", "file: beam energy");
  return missing("eV", "the file does not record the beam energy; give " + o.name);
}

Sourced convergence_semiangle_mrad(const Acquisition& acq, const Override& o) {
  if (o.value) return given(*o.value, "mrad", o.name);
  if (acq.convergence_semi_angle_mrad) return given(*acq.convergence_semi_angle_mrad, "mrad", "file: convergence_semi_angle");
  return missing("mrad", "the file does not record the convergence semi-angle; give " + o.name);
}

Sourced scan_step_A(const Acquisition& acq, const LoadRequest& load, const Override& o) {
  Sourced s;
  if (o.value) s = given(*o.value, "angstrom", o.name);
  else if (auto f = metadata_quantity(acq, "/scan_step", "angstrom")) s = *f;
  else return missing("angstrom", "the file does not record the scan step; give " + o.name);
  if (load.scan_bin[0] != load.scan_bin[1])
    return missing("angstrom", "the scan is binned " + bins_text(load.scan_bin) + ": no single scan step (bin both axes equally)");
  s.value *= static_cast<double>(load.scan_bin[0]);
  return s;
}

Sourced detector_angle_per_pixel(const Acquisition& acq, const LoadRequest& load, const Override& o, const Sourced& semiangle,
                                 double bf_radius_px) {
  std::optional<Sourced> raw;  // per unbinned pixel
  if (o.value) raw = given(*o.value, "mrad", o.name);
  else raw = metadata_quantity(acq, "/detector_angle_per_pixel", "mrad");
  if (raw) {
    if (load.detector_bin[0] != load.detector_bin[1])
      return missing("mrad", "the detector is binned " + bins_text(load.detector_bin) +
                                 ": no single angular pixel size (bin both axes equally)");
    raw->value *= static_cast<double>(load.detector_bin[0]);
    return *raw;
  }
  if (!semiangle.known())
    return missing("mrad", "the detector angle per pixel: the file records none, and deriving it needs the convergence "
                           "semi-angle (" + semiangle.missing + "); or give " + o.name);
  return given(semiangle.value / bf_radius_px, "mrad", "convergence semi-angle / bright-field disk radius");
}

}  // namespace tmorph
