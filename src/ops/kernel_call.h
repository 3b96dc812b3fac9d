// Runs one placed kernel through its backend's table; a failure becomes a tmorph::Error naming the
// backend, the op and the backend's own message.
#pragma once

#include "tensormorph/placement.h"
#include "tensormorph/plugin_abi.h"

namespace tmorph {

// Fills call.op/kernel_index/device_index from the placement, then runs it.
void run_placed_kernel(const Placement& placement, tm_op op, tm_kernel_call_v1 call);

}  // namespace tmorph
