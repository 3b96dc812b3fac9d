// CPU reference kernel for TM_OP_STATS_MOMENTS (see op_contracts.h for the block contract).
#pragma once

#include <cstdint>

#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

// Computes the partial of one canonical block: `count` (<= TM_STATS_BLOCK_ELEMENTS) elements of
// dtype starting at data. Deterministic and independent of the SIMD target: element i always
// accumulates into virtual lane i % 16, reduced in a fixed pairwise order.
tm_moments_partial_v1 block_moments(DType dtype, const void* data, uint64_t count);

}  // namespace tmorph::cpu
