// CPU reference kernel for TM_OP_DISPLAY_COLORIZE (op_contracts.h): colours and the 256-bin display
// histogram of float64 values from the host-built thresholds (src/display/thresholds.h).
#pragma once

#include <string>

#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

// Validates the call against the contract and runs it on call.threads threads (fixed 65,536-value
// pieces, integer counts summed afterwards: the result does not depend on the thread count). Returns
// TM_OK or an error with *error set.
tm_status run_display_colorize(const tm_kernel_call_v1& call, std::string* error);

}  // namespace tmorph::cpu
