// The CPU backend's TM_OP_DEQUANTIZE_PACKED kernel: the safetensors-packed quantization schemes (FP8
// with scales, gpt-oss MXFP4, bitsandbytes NF4/FP4, GPTQ, AWQ) decoded to float32, rows split across the
// call's threads. The contract, with each scheme's layout, is in include/tensormorph/op_contracts.h.
#pragma once

#include <cstdint>
#include <string>

#include "tensormorph/plugin_abi.h"

namespace tmorph::cpu {

// Bit (1 << scheme) for every TM_PACKED_* scheme this backend decodes.
uint64_t packed_scheme_mask();

// Run one call. Return TM_OK, or an error status with *error set.
tm_status run_dequantize_packed(const tm_kernel_call_v1& call, std::string* error);

}  // namespace tmorph::cpu
