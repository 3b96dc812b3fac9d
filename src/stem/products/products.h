// 4D-STEM products computed while streaming the acquisition (never holding the 4-D array): per-frame
// totals, centre-of-mass sums and virtual-detector sums (op stem.frame_sums), and per-pixel sums and
// maxima over frames (op stem.pattern_reduce), each op placed by the planner. Frames are exactly what
// load_stem would return for the same LoadRequest (region, bins, bad pixels), a batch at a time.
#pragma once

#include <vector>

#include "stem/products/product_request.h"
#include "tensormorph/planner.h"

namespace tmorph {

// Runs the request. Dense detectors (more than half the frame) of integer frames are summed as total −
// complement, so a big annulus costs like a small one. Float frames run where the planner places float frames
// (the CPU today; under --backend NAME without float kernels, the CPU with NAME's rejection in the placement). Throws InvalidArgument when the sums could overflow uint64 or the
// binned frames would need uint64 pixels; planner errors (e.g. --backend that cannot serve) propagate.
// Rank 0 of an MPI job with several ranks shares the scan rows with the other ranks
// (distributed_products.h, where this function is defined); the result is the same bit for bit.
ProductResult compute_products(const Acquisition& acq, const ProductRequest& req, const Planner& planner);
// The same in this process alone.
ProductResult compute_products_here(const Acquisition& acq, const ProductRequest& req, const Planner& planner);

// The mean pattern (sum / positions) as float64, of integer or float sums.
std::vector<double> mean_pattern(const ProductResult& r);

}  // namespace tmorph
