// Exact double value of every bit pattern of an 8- or 16-bit dtype, built once on first use.
#pragma once

#include <cstdint>
#include <vector>

#include "tensormorph/dtype.h"

namespace tmorph::cpu {

// Returns a table of 2^(8*dtype_size) doubles; dtype must be 1 or 2 bytes wide.
const std::vector<double>& decode_table(DType dtype);

}  // namespace tmorph::cpu
