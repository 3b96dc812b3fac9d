// The image of a 4D-STEM product (a scan-grid array, a diffraction pattern): one cell per value through the
// display kernels (transform, limits, colour map) with the colour bar (cell_image.h's layout). What
// `stem <product> -o OUT.png` writes and what every frame of `stem movie` shows, so the two are equal by
// construction.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "display/transform.h"
#include "render/cell_image.h"
#include "tensormorph/planner.h"

namespace tmorph {

struct ProductDisplay {
  std::string colormap;                  // empty: gray, or RdBu_r when a value is negative
  Transform transform = Transform::Linear;
  std::optional<double> lo, hi;          // product units; a missing end is the values' (automatic)
};

// The display request for these values: the given map (else gray, or RdBu_r when a value is negative), the
// transform and the given limits (resolve_params fills the missing ones from the values).
DisplayRequest product_display_request(const std::vector<double>& values, const ProductDisplay& display);

// `values` row-major with `shape` (the last entry is the columns; a [2, R, C] field is drawn as its two
// components one above the other, sharing limits). Throws what render_cells throws (an unknown map, bad limits).
CellImage render_product_image(const std::vector<uint64_t>& shape, const std::vector<double>& values, const ProductDisplay& display,
                               const Planner& planner);

}  // namespace tmorph
