// Runs one op once on a host buffer with default parameters and throwaway outputs. Calibration uses
// it to time every kernel the same way, whatever backend it belongs to.
#pragma once

#include <cstdint>

#include "tensormorph/dtype.h"
#include "tensormorph/placement.h"

namespace tmorph {

// For TM_OP_DEQUANTIZE_GGML, TM_OP_GGML_BLOCK_STATS and TM_OP_QUANT_MOMENTS the data is read as Q8_0 blocks and `elements` counts the values they
// decode to (a multiple of 32; the input is elements / 32 * 34 bytes). Throws tmorph::Error if the
// kernel fails. For TM_OP_DEQUANTIZE_PACKED the data is `elements` FP8 E4M3 codes with one per-tensor
// scale (one byte per value).
void run_op_once(const Placement& placement, tm_op op, DType dtype, const void* data, uint64_t elements,
                 unsigned threads);

}  // namespace tmorph
