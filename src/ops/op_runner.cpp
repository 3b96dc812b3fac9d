#include "ops/op_runner.h"

#include <vector>

#include "compute/op_table.h"
#include "ops/kernel_call.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/error.h"

namespace tmorph {

void run_op_once(const Placement& placement, tm_op op, DType dtype, const void* data, uint64_t elements,
                 unsigned threads) {
  const OpDescriptor* row = find_op(op);
  if (!row) throw Error(ErrorKind::Internal, "run_op_once: unknown op " + op_name(op));
  CalibrationCall call;
  row->calibration_call(call, dtype, data, elements);
  std::vector<uint8_t> output(call.output_bytes);
  const KernelArgs args{call.dtype, call.input, call.elements, call.params.empty() ? nullptr : call.params.data(), call.params.size(),
                        output.data(), output.size(), threads};
  run_placed_kernel(placement, op, args);
}

}  // namespace tmorph
