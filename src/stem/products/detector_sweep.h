// The virtual images of a detector sweep (`stem movie --sweep`) in one streaming pass: the bright-field disk
// and the angular pixel size resolved once (resolve_detector_geometry), each detector through
// resolve_virtual_detector as compute_product (product_run.h) resolves a mask product's, and every image
// summed in the same pass over the frames (compute_products with one pixel list per detector). The sums are
// exact integers, so image k equals compute_product's for detectors[k] bit for bit, at the cost of one pass
// instead of N.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "stem/acquisition.h"
#include "stem/products/detector_geometry.h"
#include "stem/products/product_run.h"
#include "tensormorph/placement.h"
#include "tensormorph/planner.h"

namespace tmorph {

struct SweepImages {
  std::array<uint64_t, 2> scan_shape{};       // output scan rows, cols
  std::vector<std::vector<uint64_t>> images;  // one per detector, row-major
  std::vector<Placement> placements;          // disk detection (when not given) and the pass
  double seconds = 0;
};

// `base` gives the load (threads, memory budget), disk, semi-angle and angle per pixel; each detector's kind
// is taken as mask. Throws what resolve_detector_geometry, resolve_virtual_detector and compute_products throw.
SweepImages compute_sweep_images(const Acquisition& acq, const ProductSpec& base, const std::vector<DetectorRequest>& detectors,
                                 const Planner& planner);

}  // namespace tmorph
