// Exact quantiles of 32- and 64-bit dtypes by radix selection, without copying the data.
//
// Each value maps to an order-preserving unsigned key (floats: flip all bits of negatives, set the
// sign bit of positives; signed ints: flip the sign bit). Pass 1 counts the top 16 key bits of every
// finite value. If the buckets holding the wanted ranks contain at most 2^20 values, pass 2 collects
// their keys and selects among them; otherwise those buckets are refined 16 bits per pass (2 passes
// for 32-bit types, 4 for 64-bit) counting only keys under a wanted prefix. Either way the result is
// the exact order statistic, so quantiles follow the numpy contract bit for bit.
#pragma once

#include <cstdint>

#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

// Probabilities one call may ask for: each wants two ranks, so at most 2 * 16 prefixes are refined.
inline constexpr uint32_t kMaxRadixProbabilities = 16;

// Upper bound of the workspace for `threads` threads: one 65,536-entry count table per thread for
// pass 1, and one per thread per prefix being refined.
uint64_t radix_select_workspace_bytes(unsigned threads);

void quantiles_radix(DType dtype, const void* data, uint64_t count, const tm_quantiles_params_v1& params,
                     tm_quantile_value_v1* out, unsigned threads);

}  // namespace tmorph::cpu
