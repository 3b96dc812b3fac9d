// A checkpoint tensor's values as a numpy array.
//   - dense little-endian dtypes numpy has (f64 f32 f16, i8..i64, u8..u64, bool): a read-only view of the
//     memory map, no copy; its base is a tensormorph.Mapping that keeps the mapped file alive;
//   - bf16, f8_e4m3fn, f8_e5m2: a float32 copy (every value exact), or with raw=True a read-only view of
//     the bit patterns as uint16 / uint8;
//   - ggml block formats and packed schemes: decoded to a float32 copy (what the statistics summarise).
// The array has the tensor's row-major shape, or the part a Region selects.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "app/runtime.h"
#include "checkpoint/checkpoint.h"
#include "core/mapped_file.h"

namespace tmorph::python {

// What a zero-copy array's base is: one mapped file, shared with the checkpoint that opened it.
struct Mapping {
  std::shared_ptr<MappedFile> file;
};

void bind_mapping(pybind11::module_& m);

// Elements begin, begin + step, …, count of them, along one axis (a Python slice after clamping; step >= 1).
struct AxisRange {
  uint64_t begin = 0, count = 0, step = 1;
};

// What part of a tensor to read, in its default 2-D view (the one the viewer draws): `rows` along the
// second-to-last axis, `cols` along the last; leading axes are kept whole. nullopt: the whole axis.
struct Region {
  std::optional<AxisRange> rows, cols;
};

// A Python slice, (start, stop) pair or None as the range of an axis of `length` elements, clamped as numpy
// clamps. `what` names the argument in errors. Throws InvalidArgument for a step < 1 or another type.
std::optional<AxisRange> axis_range(const pybind11::object& selection, uint64_t length, const char* what);

// Call with the GIL held (it is released while values are widened or decoded). Throws InvalidArgument
// for raw=True on a tensor without a dense dtype or rows= on a tensor of rank < 2, Unavailable when nothing
// here decodes it. Only the selected rows are widened or decoded; a dense view stays zero-copy (strided).
// `request` places the decoding of quantized and packed tensors (dense reads run nothing).
pybind11::array read_tensor(const std::shared_ptr<const Checkpoint>& c, const CheckpointTensor& t, bool raw,
                            const Region& region = {}, const app::ComputeRequest& request = {});

}  // namespace tmorph::python
