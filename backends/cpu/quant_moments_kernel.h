// The CPU backend's TM_OP_QUANT_MOMENTS kernel: moments of Q4_0 and Q8_0 tensors from their codes and
// fp16 scales, exact in integer arithmetic, without decoding a value (contract: op_contracts.h).
#pragma once

#include <cstdint>
#include <string>

#include "tensormorph/plugin_abi.h"

namespace tmorph::cpu {

// Bit (1 << ggml type id) for every block format this kernel summarises.
uint64_t quant_moments_format_mask();

// Run one call. Return TM_OK, or an error status with *error set.
tm_status run_quant_moments(const tm_kernel_call_v1& call, std::string* error);

}  // namespace tmorph::cpu
