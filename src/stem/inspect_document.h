// What `stem inspect --json` prints and `tensormorph.stem.inspect()` returns: an acquisition's layout,
// readiness, detector, dtype, bad pixels, beam metadata and scan shape (or why it is unknown), decoding nothing.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "stem/acquisition.h"

namespace tmorph {

// {master, layout, signature, detector_shape, dtype, readiness, pixel_mask, bad_pixels, saturation_value,
//  beam_energy_ev, convergence_semi_angle_mrad, description, metadata, scan_shape + scan_shape_source (or
//  scan_shape null + scan_shape_problem)}. scan_shape_name: how the caller names a given scan shape.
nlohmann::json inspect_document(const Acquisition& acq, const std::optional<std::array<uint64_t, 2>>& scan_shape,
                                const std::string& scan_shape_name);

}  // namespace tmorph
