// SIMD pre-binning for uniform histogram edges (f32 and f64 inputs).
#pragma once

#include <cstdint>

#include "tensormorph/dtype.h"

namespace tmorph::cpu {

// Marks an element the fast path could not bin with certainty.
inline constexpr int32_t kNeedsExactBin = -1;

// For n elements (f32 or f64) writes out[i] = floor((x - lo) * scale) when that is certainly the bin
// of x under the exact edge comparison, i.e. x is finite, inside [lo, hi) and farther than `margin`
// (in bin units) from either edge of its bin; otherwise kNeedsExactBin. `bins` bounds the result.
void candidate_bins(DType dtype, const uint8_t* data, uint64_t n, double lo, double scale, double margin,
                    uint32_t bins, int32_t* out);

}  // namespace tmorph::cpu
