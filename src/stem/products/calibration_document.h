// What `tensormorph.stem.open(path).calibration()` returns: every calibration value a product or SSB would
// use for this acquisition and request, each with its unit and source (or why it is missing), and the
// bright-field disk they follow from. Nothing is required here: a value that cannot be resolved is reported
// with its `missing` reason instead of refusing (SSB refuses later, naming it).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "stem/products/detector_geometry.h"
#include "tensormorph/placement.h"
#include "tensormorph/planner.h"

namespace tmorph {

struct CalibrationOverrides {
  Override energy_ev, semiangle_mrad, scan_step_A, detector_mrad_per_px;  // each named by the caller
};

// {energy, wavelength_A (null when the energy is unknown), semiangle, scan_step, detector_angle_per_pixel,
//  disk}. One pattern pass unless the disk is given (its placements appended to `placements`).
nlohmann::json calibration_document(const Acquisition& acq, const LoadRequest& load, const DiskRequest& disk,
                                    const CalibrationOverrides& overrides, const Planner& planner,
                                    std::vector<Placement>* placements);
// The same document around a disk already resolved (the product cache's: source "detected (prepared)"): no pass.
nlohmann::json calibration_document(const Acquisition& acq, const LoadRequest& load, const ResolvedDisk& disk,
                                    const CalibrationOverrides& overrides);

}  // namespace tmorph
