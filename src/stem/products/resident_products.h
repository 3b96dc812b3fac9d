// Products from the acquisition's resident copy (stem/resident/): what compute_products_here answers without
// decoding when the process keeps acquisitions resident (ResidentStore::process() has a budget).
//
// Contract:
// - Served from the copy: requests that read the frames as the copy holds them (every detector pixel, unbinned,
//   bad pixels masked, dtype auto or the stored one), any scan region. The copy is built on the first such request
//   (one decode of the whole acquisition, placed like a streamed pass) and ordered radially about the bright-field
//   disk detected from its own mean pattern, so the default BF/ABF/ADF/HAADF/DF and every annulus about that centre
//   cost two binary searches per position.
// - Results are bit-identical to the streamed path's (totals, centre-of-mass sums, images, pattern sum and max).
// - nullopt, with *why, when the request is not one the copy serves, the store is off, or the copy cannot be built
//   within the budget; the caller then streams as before and reports why. Errors met while building (a damaged
//   chunk: Error(BadInput) naming the frame) propagate: nothing half-built is kept.
#pragma once

#include <optional>
#include <string>

#include "stem/products/product_request.h"
#include "tensormorph/planner.h"

namespace tmorph {

std::optional<ProductResult> products_from_resident(const Acquisition& acq, const ProductRequest& req, const Planner& planner,
                                                    std::string* why);

}  // namespace tmorph
