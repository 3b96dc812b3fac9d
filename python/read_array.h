// A checkpoint tensor's values as a numpy array.
//   - dense little-endian dtypes numpy has (f64 f32 f16, i8..i64, u8..u64, bool): a read-only view of the
//     memory map, no copy; its base is a tensormorph.Mapping that keeps the mapped file alive;
//   - bf16, f8_e4m3fn, f8_e5m2: a float32 copy (every value exact), or with raw=True a read-only view of
//     the bit patterns as uint16 / uint8;
//   - ggml block formats and packed schemes: decoded to a float32 copy (what the statistics summarise).
// The array has the tensor's row-major shape.
#pragma once

#include <memory>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "checkpoint/checkpoint.h"
#include "core/mapped_file.h"

namespace tmorph::python {

// What a zero-copy array's base is: one mapped file, shared with the checkpoint that opened it.
struct Mapping {
  std::shared_ptr<MappedFile> file;
};

void bind_mapping(pybind11::module_& m);

// Call with the GIL held (it is released while values are widened or decoded). Throws InvalidArgument
// for raw=True on a tensor without a dense dtype, Unavailable when nothing here decodes it.
pybind11::array read_tensor(const std::shared_ptr<const Checkpoint>& c, const CheckpointTensor& t, bool raw);

}  // namespace tmorph::python
