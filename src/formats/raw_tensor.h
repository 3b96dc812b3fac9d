// A dense tensor stored raw (little-endian, row-major) in a file at a byte offset.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "tensormorph/dtype.h"

namespace tmorph {

struct RawTensor {
  std::shared_ptr<MappedFile> file;
  DType dtype = DType::F32;
  std::vector<uint64_t> shape;  // row-major, outermost first
  uint64_t offset = 0;          // bytes from the start of the file
  uint64_t elements = 0;
  const uint8_t* data() const { return file->data() + offset; }
};

// Parses "4096,11008" (also "4096x11008"): one or more positive sizes; throws InvalidArgument naming the
// bad field.
std::vector<uint64_t> parse_shape(const std::string& text);

// Opens path and checks that shape x dtype fits after offset. Without a shape the tensor is 1-D over
// the rest of the file (which must then be a whole number of elements). Throws BadInput naming the
// file, offset and sizes when the file is too short; never reads past the end.
RawTensor open_raw_tensor(const std::string& path, DType dtype, const std::optional<std::vector<uint64_t>>& shape,
                          uint64_t offset);

}  // namespace tmorph
