// NumPy's .npy format (versions 1.0, 2.0 and 3.0): the magic, the header dict and where the row-major (or
// column-major) payload starts. Only the header is read; `allow_pickle` is never honoured: an object array
// ('O') is reported as such and never unpickled.
//
// The header is a Python dict literal with exactly the keys 'descr' (a type string), 'fortran_order'
// (True/False) and 'shape' (a tuple of non-negative integers), as numpy.lib.format writes it. Anything else
// (a structured dtype's list descr, unknown or repeated keys, a header longer than 1 MiB, a payload past the
// end of the bytes, element counts that overflow) is a BadInput error naming the file, the byte offset and
// what was expected.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensormorph/dtype.h"

namespace tmorph {

struct NpyHeader {
  int major_version = 1;
  std::string descr;             // as written: "<f4", "|u1", ">i8", "|O", ...
  bool fortran_order = false;    // column-major payload
  std::vector<uint64_t> shape;   // () for a 0-d array
  uint64_t elements = 1;
  uint64_t element_size = 0;     // bytes per element ('O': the pointer width numpy would use, 8)
  uint64_t data_offset = 0;      // first payload byte, from the start of the .npy bytes
  uint64_t data_bytes = 0;       // elements × element_size
  std::optional<DType> dtype;    // set when a kernel reads the values as stored (little-endian or 1-byte)
  std::string unavailable_reason;  // why not, when dtype is unset
};

// True when bytes start with the .npy magic "\x93NUMPY".
bool looks_like_npy(const uint8_t* bytes, uint64_t size);

// Parses the header of the .npy held in bytes[0, size) and checks that its payload fits. `where` names the
// file (and, inside an archive, the entry) in errors.
NpyHeader parse_npy_header(const uint8_t* bytes, uint64_t size, const std::string& where);

}  // namespace tmorph
