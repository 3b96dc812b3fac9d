// The CPU backend's TM_OP_DIFF_MOMENTS kernel (op_contracts.h): per-block float64 sums of the
// differences between two float32 arrays, blocks split across the call's threads.
#pragma once

#include <string>

#include "tensormorph/plugin_abi.h"

namespace tmorph::cpu {

tm_status run_diff_moments(const tm_kernel_call_v1& call, std::string* error);

}  // namespace tmorph::cpu
