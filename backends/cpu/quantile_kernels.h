// CPU approximate kernels for TM_OP_STATS_QUANTILES, each behind a consent step (the exact one is
// radix_select.h).
#pragma once

#include <cstdint>

#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

// Exact, for small inputs: copies the finite values of every `stride`-th element (stride 1: all of them)
// and selects the order statistics. Workspace: count / stride * dtype_size bytes.
void quantiles_by_selection(DType dtype, const void* data, uint64_t count, uint64_t stride,
                            const tm_quantiles_params_v1& params, tm_quantile_value_v1* out);

// Approximate, step "quantiles.bitpattern_sketch" (f32, f64): one pass counting the top 16 bits of
// each value; the answer interval [lo, hi] is guaranteed to hold the exact quantile.
void quantiles_bitpattern_sketch(DType dtype, const void* data, uint64_t count,
                                 const tm_quantiles_params_v1& params, tm_quantile_value_v1* out);

// Approximate, step "quantiles.sampling": exact quantiles of every s-th element, with s chosen so the
// sample fits the memory budget. Deterministic; rank error typically ~1/sqrt(sample), not guaranteed.
void quantiles_sampling(DType dtype, const void* data, uint64_t count, const tm_quantiles_params_v1& params,
                        tm_quantile_value_v1* out);

}  // namespace tmorph::cpu
