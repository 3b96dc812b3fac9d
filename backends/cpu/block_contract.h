// The scalar parts of the stats.moments block contract (op_contracts.h): the fixed reduction order of
// the 16 virtual lanes, and the element-at-a-time tail every SIMD path finishes a short block with.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

// Pairwise: lanes (0+1), (2+3), ... then again on the halves, until one value is left.
inline double reduce_lanes(double* lanes) {
  for (unsigned width = TM_STATS_LANES; width > 1; width /= 2)
    for (unsigned i = 0; i < width / 2; ++i) lanes[i] = lanes[2 * i] + lanes[2 * i + 1];
  return lanes[0];
}

// What the SIMD loop found so far; the scalar tail of a short last block adds to it.
struct BlockExtremes {
  uint64_t nan = 0, zeros = 0, finite = 0;
  double min = 0, max = 0, abs_max = 0;
};

// Elements [first, count) of a block, one at a time, each into virtual lane i % 16 (the contract).
// lane_sq (may be null) receives the squares.
inline void add_tail_moments(DType dtype, const uint8_t* block, uint64_t first, uint64_t count, double* lane_sum,
                             double* lane_sq, BlockExtremes* e) {
  const size_t width = dtype_size(dtype);
  for (uint64_t i = first; i < count; ++i) {
    const double x = element_to_double(dtype, block + i * width);
    if (std::isnan(x)) { ++e->nan; continue; }
    if (x == 0) ++e->zeros;
    if (std::isinf(x)) continue;
    ++e->finite;
    lane_sum[i % TM_STATS_LANES] += x;
    if (lane_sq) lane_sq[i % TM_STATS_LANES] += x * x;
    e->min = std::min(e->min, x), e->max = std::max(e->max, x), e->abs_max = std::max(e->abs_max, std::fabs(x));
  }
}

// Fills everything of a block's partial but m2: counts, extremes (the empty ones when nothing is
// finite), sum = the reduced lanes, mean = sum / finite.
inline void set_block_partial(tm_moments_partial_v1* out, uint64_t count, const BlockExtremes& e, double* lane_sum) {
  out->count = count;
  out->finite_count = e.finite;
  out->nan_count = e.nan;
  out->inf_count = count - e.finite - e.nan;
  out->zero_count = e.zeros;
  const bool any = e.finite > 0;
  out->min = any ? e.min : std::numeric_limits<double>::infinity();
  out->max = any ? e.max : -std::numeric_limits<double>::infinity();
  out->abs_max = any ? e.abs_max : 0.0;
  out->sum = reduce_lanes(lane_sum);
  out->sum_err = 0;
  out->mean = any ? out->sum / static_cast<double>(e.finite) : 0.0;
}

// Single-pass m2 for dtypes whose squares are exact in double (all floats narrower than f64):
// m2 = sumsq - sum * mean, used only when sum * mean <= sumsq / 2, where that difference keeps at least
// half of sumsq and so loses no more than a bit to cancellation. Returns false when the block needs the
// two-pass m2 instead (|mean| comparable to or larger than the spread).
inline bool single_pass_m2(double sum, double sumsq, double mean, double* m2) {
  const double s_mean = sum * mean;
  if (!(s_mean <= sumsq / 2)) return false;
  *m2 = sumsq - s_mean;
  return true;
}

inline void add_tail_m2(DType dtype, const uint8_t* block, uint64_t first, uint64_t count, double mean, double* lane_m2) {
  const size_t width = dtype_size(dtype);
  for (uint64_t i = first; i < count; ++i) {
    const double x = element_to_double(dtype, block + i * width);
    if (std::isfinite(x)) lane_m2[i % TM_STATS_LANES] += (x - mean) * (x - mean);
  }
}

}  // namespace tmorph::cpu
