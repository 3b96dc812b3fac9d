// Runs one placed kernel through its backend's table; a failure becomes a tmorph::Error naming the
// backend, the op and the backend's own message.
#pragma once

#include "tensormorph/dtype.h"
#include "tensormorph/placement.h"
#include "tensormorph/plugin_abi.h"

namespace tmorph {

// What a call carries besides what the placement decided (op contracts in op_contracts.h).
struct KernelArgs {
  DType dtype;
  const void* input;
  uint64_t elements;
  const void* params;
  uint64_t params_size;
  void* output;
  uint64_t output_size;
  unsigned threads;
};

class ResidentCopy;

// When `resident` holds the call's input on the placed device, the kernel reads that copy (nothing is
// moved) instead of the host data.
void run_placed_kernel(const Placement& placement, tm_op op, const KernelArgs& args,
                       const ResidentCopy* resident = nullptr);

// Device memory a call reads or writes instead of host memory (the device-output extension, plugin_abi.h):
// `input` (args.input may then be null) and/or `output` (args.output may then be null), each from its
// offset on (a multiple of 65,536 bytes). Both must be on the placement's backend and device.
struct DeviceOperands {
  const ResidentCopy* input = nullptr;
  uint64_t input_offset = 0;
  const ResidentCopy* output = nullptr;
  uint64_t output_offset = 0;
};
void run_placed_kernel_on_device(const Placement& placement, tm_op op, const KernelArgs& args, const DeviceOperands& on);

}  // namespace tmorph
