// The CPU backend's kernels over ggml block formats (op_contracts.h): TM_OP_DEQUANTIZE_GGML (whole
// blocks to float32, split across the call's threads) and TM_OP_GGML_BLOCK_STATS (scales and codes).
#pragma once

#include <cstdint>
#include <string>

#include "tensormorph/plugin_abi.h"

namespace tmorph::cpu {

// Bit (1 << ggml type id) for every block format this backend decodes.
uint64_t dequantize_format_mask();

// Bit (1 << ggml type id) for every block format whose scales and codes this backend reads.
uint64_t block_stats_format_mask();

// Run one call. Return TM_OK, or an error status with *error set.
tm_status run_dequantize(const tm_kernel_call_v1& call, std::string* error);
tm_status run_block_stats(const tm_kernel_call_v1& call, std::string* error);

}  // namespace tmorph::cpu
