// A tensor's values stored as protobuf repeated fields rather than as its dtype's bytes in one place (ONNX's typed
// fields: int32_data, int64_data and uint64_data hold varints; float_data and double_data split over several records
// hold little-endian values with tags between them), decoded into the dtype's little-endian bytes. Protobuf's own wire
// reader (io::CodedInputStream) reads the varints; the records are the ones formats/protobuf_fields.h found.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensormorph/dtype.h"

namespace tmorph {

// A range of a file's bytes: [offset, offset + bytes).
struct ByteRun {
  uint64_t offset = 0, bytes = 0;
  bool operator==(const ByteRun&) const = default;
};

enum class ValueEncoding : uint8_t {
  // Protobuf varints, one per element. Integer dtypes: the element's value, read as int64 (two's complement: a
  // negative value is a 10-byte varint) for the signed types and as uint64 for the unsigned ones; it must lie in the
  // dtype's range. BOOL: 0 or 1. F16, BF16, F8: the element's bits, 0 .. 2^bits - 1 (zero-extended). Not F32/F64.
  Varints,
  // The dtype's own little-endian bytes, a whole number of elements in each run (fixed32/fixed64 values).
  LittleEndian,
};

// Where a tensor's encoded values lie (runs of one file, in element order) and how they are encoded.
struct EncodedValues {
  ValueEncoding encoding = ValueEncoding::Varints;
  std::vector<ByteRun> runs;
  bool operator==(const EncodedValues&) const = default;
};

// "varints" / "little-endian", and back (nullopt for any other text).
const char* value_encoding_name(ValueEncoding e);
std::optional<ValueEncoding> parse_value_encoding(const std::string& name);

// Decodes `v` (runs inside bytes[0, size)) as `elements` elements of `dtype` into dst, elements × dtype_size(dtype)
// bytes, little-endian; with dst null, only checks. Memory: none beyond dst. BadInput "<path>: <what>: ..." when a run
// lies outside the bytes, a varint is truncated or longer than 10 bytes, the runs hold more or fewer values than
// `elements`, or a value does not fit the dtype ("value 3 at offset 120 is 300, outside u8's range 0 .. 255").
void decode_values(const uint8_t* bytes, uint64_t size, const EncodedValues& v, DType dtype, uint64_t elements, uint8_t* dst,
                   const std::string& path, const std::string& what);

}  // namespace tmorph
