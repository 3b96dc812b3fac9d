// The fixed reduction order of the 16 virtual accumulator lanes (op_contracts.h, stats.moments).
#pragma once

#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

// Pairwise: lanes (0+1), (2+3), ... then again on the halves, until one value is left.
inline double reduce_lanes(double* lanes) {
  for (unsigned width = TM_STATS_LANES; width > 1; width /= 2)
    for (unsigned i = 0; i < width / 2; ++i) lanes[i] = lanes[2 * i] + lanes[2 * i + 1];
  return lanes[0];
}

}  // namespace tmorph::cpu
