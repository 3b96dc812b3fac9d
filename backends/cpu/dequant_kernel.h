// The CPU backend's TM_OP_DEQUANTIZE_GGML kernel (op_contracts.h): whole blocks to float32, split
// across the call's threads.
#pragma once

#include <cstdint>
#include <string>

#include "tensormorph/plugin_abi.h"

namespace tmorph::cpu {

// Bit (1 << ggml type id) for every block format this backend decodes.
uint64_t dequantize_format_mask();

// Runs one call. Returns TM_OK, or an error status with *error set.
tm_status run_dequantize(const tm_kernel_call_v1& call, std::string* error);

}  // namespace tmorph::cpu
