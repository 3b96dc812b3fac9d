// safetensors: the header of one file (u64 little-endian length, then a JSON object), validated as
// strictly as the reference library: a bounded header that fits the file, known dtypes, shapes whose
// byte size matches their data_offsets, offsets contiguous from 0 with no hole or overlap, and a data
// section exactly as long as the last tensor's end. Errors name the file and the field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tensormorph/dtype.h"

namespace tmorph {

// The reference library refuses headers above 100 MB; so do we.
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;        // as written in the file, e.g. "BF16", "F8_E4M3", "F4"
  std::optional<DType> dtype;    // empty for dtypes recognised but without a kernel yet
  std::vector<uint64_t> shape;   // row-major
  uint64_t elements = 0;
  uint64_t begin = 0, end = 0;   // byte offsets within the data section
  uint64_t file_offset = 0;      // absolute offset of the first byte in the file
};

struct SafetensorsHeader {
  uint64_t header_bytes = 0;     // the JSON's length
  uint64_t data_offset = 0;      // 8 + header_bytes
  uint64_t data_bytes = 0;
  std::map<std::string, std::string> metadata;  // __metadata__ (empty when absent or null)
  std::vector<SafetensorsTensor> tensors;       // in file order (ascending offsets)
};

// Bits per element of a safetensors dtype name; 0 when the name is unknown. Sub-byte types (F4, F6)
// report 4 or 6 bits.
uint32_t safetensors_dtype_bits(const std::string& name);

// Parses and validates the header of `bytes` (the whole file, `size` bytes). `path` names the file in
// errors. Throws tmorph::Error(BadInput) on any violation.
SafetensorsHeader parse_safetensors(const uint8_t* bytes, uint64_t size, const std::string& path);

}  // namespace tmorph
