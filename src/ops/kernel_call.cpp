#include "ops/kernel_call.h"

#include "compute/op_table.h"
#include "compute/resident_copy.h"

#include "tensormorph/backend_registry.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

tm_kernel_call_v1 make_call(const Placement& placement, tm_op op, const KernelArgs& args) {
  // The params must be the op's whole struct (its row of compute/op_table.h): a short one is a bug of the
  // driver here, caught before any backend reads past it.
  if (const OpDescriptor* row = find_op(op); row && row->params_size && (!args.params || args.params_size < row->params_size))
    throw Error(ErrorKind::Internal, op_name(op) + ": params of " + std::to_string(args.params_size) + " bytes, the contract's struct has " +
                                         std::to_string(row->params_size));
  tm_kernel_call_v1 call{};
  call.struct_size = sizeof call;
  call.op = op;
  call.kernel_index = placement.kernel_index;
  call.device_index = placement.device_index;
  call.dtype = static_cast<tm_dtype>(args.dtype);
  call.input = args.input;
  call.element_count = args.elements;
  call.params = args.params;
  call.params_size = args.params_size;
  call.output = args.output;
  call.output_size = args.output_size;
  call.threads = args.threads ? args.threads : 1;
  return call;
}

void run_call(const Placement& placement, tm_op op, const tm_kernel_call_v1& call) {
  tm_message msg{};
  const tm_status st = placement.backend_ref->table->run(&call, &msg);
  if (st == TM_OK) return;
  msg.text[sizeof msg.text - 1] = 0;
  throw Error(st == TM_ERR_UNSUPPORTED ? ErrorKind::Unavailable : ErrorKind::Internal,
              placement.backend + " failed to run " + op_name(op) + " (status " + std::to_string(st) + "): " + msg.text);
}

}  // namespace

void run_placed_kernel(const Placement& placement, tm_op op, const KernelArgs& args, const ResidentCopy* resident) {
  tm_kernel_call_v1 call = make_call(placement, op, args);
  if (resident && resident->serves(placement, args.input, args.elements * dtype_size(args.dtype))) {
    call.input_buffer = resident->handle();
    call.input_offset = resident->offset_of(args.input);
  }
  run_call(placement, op, call);
}

void run_placed_kernel_on_device(const Placement& placement, tm_op op, const KernelArgs& args, const DeviceOperands& on) {
  for (const ResidentCopy* r : {on.input, on.output})
    if (r && !r->on(placement))
      throw Error(ErrorKind::Internal, op_name(op) + ": a device operand is not on " + placement.backend + "'s placed device");
  tm_kernel_call_v1 call = make_call(placement, op, args);
  if (on.input) call.input_buffer = on.input->handle(), call.input_offset = on.input_offset;
  if (on.output) call.output_buffer = on.output->handle(), call.output_offset = on.output_offset;
  run_call(placement, op, call);
}

}  // namespace tmorph
