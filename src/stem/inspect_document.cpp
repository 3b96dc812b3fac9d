#include "stem/inspect_document.h"

#include <algorithm>

#include "tensormorph/dtype.h"
#include "tensormorph/error.h"

namespace tmorph {

nlohmann::json inspect_document(const Acquisition& acq, const std::optional<std::array<uint64_t, 2>>& scan_shape,
                                const std::string& scan_shape_name) {
  nlohmann::json j = {{"format", acq.format},
                      {"master", acq.master},
                      {"layout", acq.layout},
                      {"signature", acq.signature},
                      {"detector_shape", {acq.detector_rows, acq.detector_cols}},
                      {"dtype", dtype_name(acq.dtype)},
                      {"readiness", acq.readiness_json()},
                      {"pixel_mask", acq.pixel_mask_path.empty() ? nlohmann::json() : nlohmann::json(acq.pixel_mask_path)},
                      {"bad_pixels", std::count_if(acq.pixel_mask.begin(), acq.pixel_mask.end(), [](uint32_t m) { return m > 0; })},
                      {"saturation_value", acq.saturation_value ? nlohmann::json(*acq.saturation_value) : nlohmann::json()},
                      {"beam_energy_ev", acq.beam_energy_ev ? nlohmann::json(*acq.beam_energy_ev) : nlohmann::json()},
                      {"convergence_semi_angle_mrad",
                       acq.convergence_semi_angle_mrad ? nlohmann::json(*acq.convergence_semi_angle_mrad) : nlohmann::json()},
                      {"description", acq.description},
                      {"metadata", acq.metadata}};
  try {
    const auto s = resolve_scan_shape(acq, scan_shape);
    j["scan_shape"] = {s[0], s[1]};
    j["scan_shape_source"] = scan_shape_source(acq, scan_shape, s, scan_shape_name);
  } catch (const Error& e) {
    j["scan_shape"] = nullptr;
    j["scan_shape_problem"] = e.what();
  }
  return j;
}

}  // namespace tmorph
