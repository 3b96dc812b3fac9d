#include "formats/raw_tensor.h"

#include <sstream>

#include "tensormorph/error.h"

namespace tmorph {

std::vector<uint64_t> parse_shape(const std::string& text) {
  std::vector<uint64_t> shape;
  std::string field;
  std::string normalized = text;
  for (char& c : normalized)
    if (c == 'x' || c == 'X') c = ',';
  std::stringstream in(normalized);
  size_t index = 0;
  while (std::getline(in, field, ',')) {
    size_t pos = 0;
    unsigned long long v = 0;
    bool ok = !field.empty() && field.find_first_not_of("0123456789") == std::string::npos && field.find_first_not_of('0') != std::string::npos;
    if (ok) {
      try {
        v = std::stoull(field, &pos);
      } catch (const std::exception&) {
        ok = false;
      }
    }
    if (!ok)
      throw Error(ErrorKind::InvalidArgument, "--shape: dimension " + std::to_string(index) + " is '" + field +
                                                  "', expected a positive integer");
    shape.push_back(v);
    ++index;
  }
  if (shape.empty()) throw Error(ErrorKind::InvalidArgument, "--shape: expected dimensions like 4096,11008");
  return shape;
}

RawTensor open_raw_tensor(const std::string& path, DType dtype, const std::optional<std::vector<uint64_t>>& shape,
                          uint64_t offset) {
  RawTensor t;
  t.file = std::make_shared<MappedFile>(path);
  t.dtype = dtype;
  t.offset = offset;
  const uint64_t size = t.file->size();
  const uint64_t width = dtype_size(dtype);
  if (offset > size)
    throw Error(ErrorKind::BadInput, path + ": --offset " + std::to_string(offset) + " is past the end of the file (" +
                                         std::to_string(size) + " bytes)");
  const uint64_t available = size - offset;
  if (!shape) {
    if (available % width)
      throw Error(ErrorKind::BadInput, path + ": " + std::to_string(available) + " bytes after offset " +
                                           std::to_string(offset) + " are not a whole number of " +
                                           std::string(dtype_name(dtype)) + " elements; give --shape");
    t.elements = available / width;
    t.shape = {t.elements};
    return t;
  }
  t.shape = *shape;
  uint64_t elements = 1;
  for (size_t i = 0; i < shape->size(); ++i) {
    const uint64_t d = (*shape)[i];
    if (d != 0 && elements > UINT64_MAX / d)
      throw Error(ErrorKind::InvalidArgument, "--shape: the element count overflows 64 bits at dimension " + std::to_string(i));
    elements *= d;
  }
  if (elements > UINT64_MAX / width)
    throw Error(ErrorKind::InvalidArgument, "--shape: the byte size overflows 64 bits");
  const uint64_t bytes = elements * width;
  if (bytes > available)
    throw Error(ErrorKind::BadInput, path + ": shape needs " + std::to_string(bytes) + " bytes of " +
                                         std::string(dtype_name(dtype)) + " from offset " + std::to_string(offset) +
                                         ", but the file has only " + std::to_string(available) +
                                         " bytes there (file size " + std::to_string(size) + ")");
  t.elements = elements;
  return t;
}

}  // namespace tmorph
