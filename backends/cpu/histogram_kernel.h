// CPU reference kernels for TM_OP_STATS_HISTOGRAM and TM_OP_STATS_BITPATTERN_HISTOGRAM.
#pragma once

#include <cstdint>

#include "tensormorph/dtype.h"

namespace tmorph::cpu {

// Adds the elements' bins to counts[bins + 2] (layout in op_contracts.h). Exact: a value's bin is
// decided by comparisons against the given edges, never by the rounding of a division.
void histogram_add(DType dtype, const void* data, uint64_t count, const double* edges, uint32_t bins,
                   uint64_t* counts);

// Adds every element's raw bit pattern to counts[256] (1-byte dtypes) or counts[65536] (2-byte).
void bitpattern_add(DType dtype, const void* data, uint64_t count, uint64_t* counts);

}  // namespace tmorph::cpu
