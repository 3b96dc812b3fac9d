#include "stem/products/calibration_document.h"

#include "stem/calibration.h"

namespace tmorph {

nlohmann::json calibration_document(const Acquisition& acq, const LoadRequest& load, const DiskRequest& disk,
                                    const CalibrationOverrides& o, const Planner& planner,
                                    std::vector<Placement>* placements) {
  return calibration_document(acq, load, resolve_bright_field_disk(acq, load, disk, planner, placements), o);
}

nlohmann::json calibration_document(const Acquisition& acq, const LoadRequest& load, const ResolvedDisk& disk,
                                    const CalibrationOverrides& o) {
  const DetectorGeometry g = detector_geometry_around(acq, load, disk, o.semiangle_mrad, o.detector_mrad_per_px);
  const Sourced energy = beam_energy_ev(acq, o.energy_ev);
  const bool energy_usable = energy.known() && energy.value > 0;
  return {{"energy", to_json(energy)},
          {"wavelength_A", energy_usable ? nlohmann::json(electron_wavelength_A(energy.value)) : nlohmann::json()},
          {"semiangle", to_json(g.semiangle_mrad)},
          {"scan_step", to_json(scan_step_A(acq, load, o.scan_step_A))},
          {"detector_angle_per_pixel", to_json(g.angle_per_pixel)},
          {"disk", to_json(g.disk)}};
}

}  // namespace tmorph
