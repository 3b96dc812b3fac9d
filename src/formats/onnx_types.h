// ONNX's element types (TensorProto.DataType, ONNX 1.18's list): their names, their width in the raw bytes, the
// typed field that holds them when raw_data is not used, and the dtype a kernel reads them as, where one does.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tensormorph/dtype.h"

namespace tmorph {

struct OnnxType {
  int32_t code = 0;            // TensorProto.DataType
  const char* name = "";       // "FLOAT", "BFLOAT16", "FLOAT8E4M3FN", ...
  uint32_t bits = 0;           // per element in raw_data and external data (4 for the packed 4-bit types); 0: none (STRING)
  const char* typed_field = "";// the field holding the values otherwise: "float_data", "int32_data", ...
  uint32_t typed_per_element = 1;  // values of typed_field per element (2 for the complex types)
  std::optional<DType> dtype;  // set when a kernel reads the raw bytes as they are
};

// The type called `code`; nullopt for a code ONNX does not define (0, UNDEFINED, included).
std::optional<OnnxType> onnx_type(int32_t code);

// Bytes that `elements` elements of `type` take in raw_data (4-bit types: two per byte, rounded up); nullopt when
// the count overflows or the type has no raw form (STRING).
std::optional<uint64_t> onnx_raw_bytes(const OnnxType& type, uint64_t elements);

}  // namespace tmorph
