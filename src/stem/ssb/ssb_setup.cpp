#include "stem/ssb/ssb_setup.h"

#include <cmath>

#include "core/json_number.h"
#include "stem/calibration.h"
#include "tensormorph/error.h"

namespace tmorph {

SsbCalibration SsbSetup::calibration(double scan_rotation_deg) const {
  SsbCalibration cal;
  cal.energy_ev = energy_ev.value, cal.semiangle_mrad = geometry.semiangle_mrad.value, cal.scan_step_A = scan_step_A.value;
  cal.detector_mrad_per_px = geometry.angle_per_pixel.value;
  cal.scan_rotation_deg = scan_rotation_deg;
  const BrightFieldDisk& d = geometry.disk.disk;
  cal.disk_row = d.row, cal.disk_col = d.col, cal.disk_radius_px = d.radius;
  return cal;
}

SsbSetup resolve_ssb_setup(const Acquisition& acq, const LoadRequest& load, const SsbSetupRequest& request,
                           const Planner& planner, std::vector<Placement>* placements) {
  SsbSetup s;
  s.energy_ev = require_positive(beam_energy_ev(acq, request.energy_ev), "beam energy");
  require_positive(convergence_semiangle_mrad(acq, request.semiangle_mrad), "convergence semi-angle");
  if (load.scan_bin[0] != load.scan_bin[1])
    throw Error(ErrorKind::InvalidArgument, "SSB: the scan must be binned equally on both axes (one scan step)");
  s.scan_step_A = require_positive(scan_step_A(acq, load, request.scan_step_A), "scan step");
  s.geometry = resolve_detector_geometry(acq, load, request.disk, request.semiangle_mrad, request.detector_mrad_per_px, planner,
                                         placements);
  if (load.detector_bin[0] != load.detector_bin[1])
    throw Error(ErrorKind::InvalidArgument, "SSB: the detector must be binned equally on both axes");
  require_positive(s.geometry.angle_per_pixel, "detector angle per pixel");
  if (load.mask_bad_pixels && load.detector_bin[0] == 1 && !load.detector_region)
    for (uint64_t i = 0; i < acq.pixel_mask.size(); ++i)
      if (acq.pixel_mask[i]) s.excluded_pixels.push_back(static_cast<uint32_t>(i));
  return s;
}

nlohmann::json ssb_calibration_json(const SsbSetup& s, const Sourced& scan_rotation) {
  return {{"energy", to_json(s.energy_ev)},
          {"semiangle", to_json(s.geometry.semiangle_mrad)},
          {"scan_step", to_json(s.scan_step_A)},
          {"detector_angle_per_pixel", to_json(s.geometry.angle_per_pixel)},
          {"scan_rotation", to_json(scan_rotation)},
          {"wavelength_A", electron_wavelength_A(s.energy_ev.value)}};
}

std::array<double, 2> ssb_rotation_candidates(const DpcRotation& dpc) {
  const double base = std::fmod(360.0 - dpc.angle * 180 / M_PI, 180.0);
  return {base, base + 180};
}

SsbRotationSearch choose_ssb_scan_rotation(const DpcRotation& dpc, const std::function<double(double)>& loss) {
  SsbRotationSearch s;
  s.dpc = dpc;
  s.candidates_deg = ssb_rotation_candidates(dpc);
  s.losses[0] = loss(s.candidates_deg[0]);
  s.losses[1] = loss(s.candidates_deg[1]);
  s.chosen = s.losses[1] < s.losses[0] ? 1 : 0;
  s.rotation = {s.candidates_deg[s.chosen], "degree", "DPC rotation, 180-degree flip by the lower SSB loss", ""};
  return s;
}

nlohmann::json to_json(const SsbRotationSearch& s) {
  return {{"dpc_angle_deg", s.dpc.angle * 180 / M_PI}, {"dpc_transpose", s.dpc.transpose},
          {"candidates_deg", s.candidates_deg}, {"losses", {json_number(s.losses[0]), json_number(s.losses[1])}}};
}

void set_higher_order(Aberrations& ab, std::string_view name, double value_A, double angle_deg) {
  int index = -1;
  for (int i = 0; i < kHigherOrders; ++i)
    if (name == kHigherOrderNames[i]) index = i;
  if (index < 0) {
    std::string names;
    for (const char* n : kHigherOrderNames) names += std::string(names.empty() ? "" : ", ") + n;
    throw Error(ErrorKind::InvalidArgument, "aberration " + std::string(name) + ": expected NAME one of " + names +
                                                " (C10 and C12 are the quadratic terms, set on their own)");
  }
  if (!std::isfinite(value_A) || !std::isfinite(angle_deg))
    throw Error(ErrorKind::InvalidArgument, "aberration " + std::string(name) + ": values must be finite");
  if (kHigherOrderNames[index][2] == '0' && angle_deg != 0)
    throw Error(ErrorKind::InvalidArgument, "aberration " + std::string(name) + " is round (m = 0): it has no azimuth");
  ab.higher_A[index] = value_A, ab.higher_deg[index] = angle_deg;
}

nlohmann::json to_json(const Aberrations& ab) {
  nlohmann::json j = {{"C10", ab.C10_A}, {"C12", ab.C12_A}, {"phi12", ab.phi12_deg}};
  for (int i = 0; i < kHigherOrders; ++i) {
    if (ab.higher_A[i] == 0) continue;
    const std::string name = kHigherOrderNames[i];
    j[name] = ab.higher_A[i];
    if (name[2] != '0') j["phi" + name.substr(1)] = ab.higher_deg[i];
  }
  return j;
}

}  // namespace tmorph
