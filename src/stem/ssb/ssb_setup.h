// What an SSB reconstruction resolves before it runs, as the products do (detector_geometry.h): the
// bright-field disk and the detector's angular pixel size through the same function as every product, the
// rest of the calibration with sources (calibration.h), the pixels SSB must not use, the scan rotation from
// the DPC rotation, and the higher-order aberrations by name — each with its JSON report fragment.
//
// Contract (docs/stem.md, "SSB"):
// - SSB needs every calibration value (Error(InvalidArgument) naming what is missing or not positive, in the
//   order energy, semi-angle, scan step, then the disk, then the angular pixel size) and equal bins on both
//   scan axes and both detector axes.
// - Excluded pixels: the file's bad pixels (pixel_mask > 0) when they are masked and the detector is neither
//   cropped nor binned (the load zeroes them; as bright-field pixels they would bias the disk's mean).
// - Scan rotation from DPC: the angle that makes the centre-of-mass field curl-free is −(scan rotation) mod
//   180°, so the candidates are base = (360° − dpc angle) mod 180° and base + 180°; the lower SSB loss wins
//   (a tie keeps base).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "stem/calibration.h"
#include "stem/products/detector_geometry.h"
#include "stem/products/dpc.h"
#include "stem/ssb/ssb.h"

namespace tmorph {

struct SsbSetupRequest {
  DiskRequest disk;
  Override energy_ev, semiangle_mrad, scan_step_A, detector_mrad_per_px;  // each named by the caller
};

struct SsbSetup {
  DetectorGeometry geometry;  // disk, semi-angle, angular pixel size
  Sourced energy_ev, scan_step_A;
  std::vector<uint32_t> excluded_pixels;
  // The calibration ssb_reconstruct / SsbProblem take, with this scan rotation (degrees).
  SsbCalibration calibration(double scan_rotation_deg) const;
};

// Resolves per the contract (one pattern pass unless the disk is given; its placements appended).
SsbSetup resolve_ssb_setup(const Acquisition& acq, const LoadRequest& load, const SsbSetupRequest& request,
                           const Planner& planner, std::vector<Placement>* placements);

// {"energy", "semiangle", "scan_step", "detector_angle_per_pixel", "scan_rotation": {value, unit, source},
//  "wavelength_A"}.
nlohmann::json ssb_calibration_json(const SsbSetup& setup, const Sourced& scan_rotation);

struct SsbRotationSearch {
  DpcRotation dpc;
  std::array<double, 2> candidates_deg{};
  std::array<double, 2> losses{};
  int chosen = 0;    // index into candidates_deg
  Sourced rotation;  // the chosen candidate, in degrees, with its source
};

// The contract's two candidates, base and base + 180°, in degrees.
std::array<double, 2> ssb_rotation_candidates(const DpcRotation& dpc);

// The contract's search: loss(candidate_deg) for both candidates (in order), the lower wins.
SsbRotationSearch choose_ssb_scan_rotation(const DpcRotation& dpc, const std::function<double(double)>& loss);

// {"dpc_angle_deg", "dpc_transpose", "candidates_deg", "losses"}.
nlohmann::json to_json(const SsbRotationSearch& s);

// Sets the higher-order coefficient `name` (kHigherOrderNames) to value_A with azimuth angle_deg. Throws
// Error(InvalidArgument) for an unknown name (listing the names), a value that is not finite, or an azimuth
// on a round (m = 0) aberration.
void set_higher_order(Aberrations& ab, std::string_view name, double value_A, double angle_deg);

// {"C10", "C12", "phi12"} always (Å, Å, degrees); each non-zero higher order as "C30": Å and, for m > 0,
// "phi23": degrees.
nlohmann::json to_json(const Aberrations& ab);

}  // namespace tmorph
