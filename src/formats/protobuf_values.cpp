#include "formats/protobuf_values.h"

#include <google/protobuf/io/coded_stream.h>

#include <cstring>
#include <limits>

#include "formats/protobuf_fields.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

using google::protobuf::io::CodedInputStream;

[[noreturn]] void bad_values(const std::string& path, const std::string& what, const std::string& why) {
  throw Error(ErrorKind::BadInput, path + ": " + what + ": " + why);
}

// The values a varint may hold for `d`: [lo, hi] as int64 when `is_signed`, else as uint64.
struct VarintRange {
  bool is_signed = false;
  int64_t lo = 0, hi = 0;  // signed bounds
  uint64_t max = 0;        // unsigned bound (lower bound 0)
};

VarintRange varint_range(DType d, const std::string& path, const std::string& what) {
  switch (d) {
    case DType::I8: return {true, std::numeric_limits<int8_t>::min(), std::numeric_limits<int8_t>::max(), 0};
    case DType::I16: return {true, std::numeric_limits<int16_t>::min(), std::numeric_limits<int16_t>::max(), 0};
    case DType::I32: return {true, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), 0};
    case DType::I64: return {true, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 0};
    case DType::U8: case DType::F8_E4M3FN: case DType::F8_E5M2: return {false, 0, 0, 0xff};
    case DType::U16: case DType::F16: case DType::BF16: return {false, 0, 0, 0xffff};
    case DType::U32: return {false, 0, 0, 0xffffffffu};
    case DType::U64: return {false, 0, 0, std::numeric_limits<uint64_t>::max()};
    case DType::BOOL: return {false, 0, 0, 1};
    case DType::F32: case DType::F64: break;
  }
  throw Error(ErrorKind::Internal, path + ": " + what + ": " + std::string(dtype_name(d)) + " values are not stored as varints");
}

// The value as the error shows it: signed unless the dtype is one of the unsigned 32/64-bit types (uint64_data).
std::string shown(uint64_t v, DType d) {
  return d == DType::U32 || d == DType::U64 ? std::to_string(v) : std::to_string(static_cast<int64_t>(v));
}

void check_run(const ByteRun& r, uint64_t size, const std::string& path, const std::string& what) {
  if (r.offset > size || r.bytes > size - r.offset)
    bad_values(path, what, "values at offset " + std::to_string(r.offset) + " + " + std::to_string(r.bytes) + " bytes run past the end (" +
                               std::to_string(size) + " bytes)");
  if (r.bytes > kProtobufMaxMessageBytes)
    bad_values(path, what, "values at offset " + std::to_string(r.offset) + ": " + std::to_string(r.bytes) + " bytes, more than one protobuf message holds");
}

}  // namespace

const char* value_encoding_name(ValueEncoding e) { return e == ValueEncoding::Varints ? "varints" : "little-endian"; }

std::optional<ValueEncoding> parse_value_encoding(const std::string& name) {
  if (name == "varints") return ValueEncoding::Varints;
  if (name == "little-endian") return ValueEncoding::LittleEndian;
  return std::nullopt;
}

void decode_values(const uint8_t* bytes, uint64_t size, const EncodedValues& v, DType dtype, uint64_t elements, uint8_t* dst,
                   const std::string& path, const std::string& what) {
  const size_t width = dtype_size(dtype);
  const auto count_problem = [&](const std::string& held) {
    return "holds " + held + " values; its shape has " + std::to_string(elements) + " elements";
  };
  if (v.encoding == ValueEncoding::LittleEndian) {
    uint64_t at = 0;  // bytes written
    for (const ByteRun& r : v.runs) {
      check_run(r, size, path, what);
      if (r.bytes % width || r.bytes > elements * width - at)
        bad_values(path, what, "values at offset " + std::to_string(r.offset) + ": " + std::to_string(r.bytes) + " bytes " +
                                   (r.bytes % width ? "are not whole " + std::to_string(width) + "-byte values" : "run past the tensor's " +
                                   std::to_string(elements) + " elements"));
      if (dst && r.bytes) std::memcpy(dst + at, bytes + r.offset, r.bytes);
      at += r.bytes;
    }
    if (at != elements * width) bad_values(path, what, count_problem(std::to_string(at / width)));
    return;
  }
  const VarintRange range = varint_range(dtype, path, what);
  uint64_t index = 0;
  for (const ByteRun& r : v.runs) {
    check_run(r, size, path, what);
    const int n = static_cast<int>(r.bytes);
    CodedInputStream in(bytes + r.offset, n);
    while (in.CurrentPosition() < n) {
      const uint64_t offset = r.offset + static_cast<uint64_t>(in.CurrentPosition());
      uint64_t value = 0;
      if (!in.ReadVarint64(&value))
        bad_values(path, what, "value " + std::to_string(index) + " at offset " + std::to_string(offset) + ": a varint that is truncated or longer than 10 bytes");
      if (index >= elements) bad_values(path, what, count_problem("more than " + std::to_string(elements)));
      const bool fits = range.is_signed ? static_cast<int64_t>(value) >= range.lo && static_cast<int64_t>(value) <= range.hi : value <= range.max;
      if (!fits)
        bad_values(path, what, "value " + std::to_string(index) + " at offset " + std::to_string(offset) + " is " + shown(value, dtype) + ", outside " +
                                   std::string(dtype_name(dtype)) + "'s range " +
                                   (range.is_signed ? std::to_string(range.lo) + " .. " + std::to_string(range.hi) : "0 .. " + std::to_string(range.max)));
      if (dst)
        for (size_t b = 0; b < width; ++b) dst[index * width + b] = static_cast<uint8_t>(value >> (8 * b));  // little-endian, low bytes
      ++index;
    }
  }
  if (index != elements) bad_values(path, what, count_problem(std::to_string(index)));
}

}  // namespace tmorph
