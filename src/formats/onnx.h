// ONNX models (.onnx: one protobuf ModelProto, ONNX's schema onnx.proto): the graph's initializers as tensors and
// the model's metadata. The schema's generated classes (libprotobuf-lite) decode every field but the bulk payloads;
// those (raw_data and the typed fields) are located with protobuf's wire reader (formats/protobuf_fields.h) and
// stay in place in the file, as external data stays in its own file.
//
// A tensor is readable in place when its values are raw_data, external data, or one packed float_data (FLOAT) or
// double_data (DOUBLE) record, which are little-endian IEEE values as a kernel reads them. Values in the varint fields
// (int32_data, int64_data, uint64_data) and float_data/double_data in several records are readable decoded
// (`encoded`: the records' payloads, formats/protobuf_values.h); every varint is checked here against the element
// type (a UINT8 of 300, a BOOL of 2, an INT32 outside int32: BadInput naming the value's index, offset and value).
// string_data and an element type without a kernel (COMPLEX64, the FNUZ float8 types, the 4-bit types, FLOAT8E8M0,
// STRING) are listed and reported unreadable. Everything the file states is checked:
// a truncated or malformed message, a negative dimension or an element count that overflows, a raw_data or
// typed-field size that does not match shape × element size, values in two places or none, an external location
// that is absolute or climbs out of the model's folder (`..`), an offset or length that is not a decimal number:
// each is a BadInput error "<path>: graph.initializer[i] 'name' ...: what was expected" naming the offset where
// there is one. Sparse initializers are listed unreadable (not densified); Constant nodes' tensors and subgraphs'
// initializers are not listed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "formats/protobuf_values.h"
#include "tensormorph/dtype.h"

namespace tmorph {

struct OnnxTensor {
  std::string name;
  int32_t data_type = 0;            // TensorProto.DataType
  std::string stored_type;          // its name: "FLOAT", "BFLOAT16", ...; "sparse FLOAT" for a sparse initializer
  std::optional<DType> dtype;       // set when a kernel reads its values in place
  std::string unavailable_reason;   // why not, when dtype is unset
  std::vector<uint64_t> shape;      // row-major, as dims lists them
  uint64_t elements = 0;
  uint64_t bytes = 0;               // of its values where they lie (raw bytes, external data, a typed field's payloads:
                                    // varints and strings as encoded, tags between records excluded)
  std::string field;                // where its values are: "raw_data", "float_data", "external data", ...
  uint64_t offset = 0;              // first byte of its values: in the model's bytes, or in its external file
  bool external = false;
  std::string location;             // external: its data file, relative to the model's folder
  std::optional<uint64_t> length;   // external: the declared length, if any (else: shape × element size)
  // Set (with dtype) when the values must be decoded rather than read in place: the typed field's record payloads in
  // the model's bytes, in order (offset is the first one's). Decoded size: elements × dtype size, at most 8 × `bytes`
  // (a varint is at least one byte; a little-endian run is the values' own bytes).
  std::optional<EncodedValues> encoded;
};

struct OnnxModel {
  std::vector<std::pair<std::string, std::string>> metadata;  // "onnx.ir_version", ..., then metadata_props
  std::vector<OnnxTensor> tensors;                             // graph.initializer, then graph.sparse_initializer
  uint64_t header_bytes = 0;  // bytes before the first tensor values in the model's bytes (all of them when none)
};

// Parses the model held in bytes[0, size); `path` names it in errors. Sizes above 2 GiB - 1 are refused
// (protobuf's limit; larger models keep their weights in external data).
OnnxModel parse_onnx(const uint8_t* bytes, uint64_t size, const std::string& path);

// Why an external data `location` is refused (empty when it is a relative path inside the model's folder):
// empty, absolute, a `..` component, a NUL byte.
std::string onnx_location_problem(const std::string& location);

// Checks an external tensor against its data file (data_path, file_size bytes): its declared length equals
// shape × element size, and offset + that many bytes lie inside the file. BadInput naming model_path, the
// tensor, the key and the sizes.
void check_onnx_external_range(const OnnxTensor& t, uint64_t file_size, const std::string& model_path, const std::string& data_path);

}  // namespace tmorph
