// The CPU backend's TM_OP_DECODE_BITSHUFFLE_LZ4 kernel: chunks of HDF5 filter 32008 with LZ4 decoded by
// liblz4 and the SIMD bit transpose (support/bitshuffle_lz4_decode.h), chunks spread over threads.
#pragma once

#include <string>

#include "tensormorph/plugin_abi.h"

namespace tmorph::cpu {

// Run one call (contract: op_contracts.h). Return TM_OK, or an error status with *error set.
tm_status run_decode_bitshuffle_lz4(const tm_kernel_call_v1& call, std::string* error);

}  // namespace tmorph::cpu
