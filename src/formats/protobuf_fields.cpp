#include "formats/protobuf_fields.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

using google::protobuf::io::CodedInputStream;
using google::protobuf::internal::WireFormatLite;

[[noreturn]] void bad_field(const std::string& path, const std::string& what, uint64_t offset, const std::string& why) {
  throw Error(ErrorKind::BadInput, path + ": " + what + " at offset " + std::to_string(offset) + ": " + why);
}

void check_span(const uint8_t* bytes, uint64_t begin, uint64_t end, const std::string& path, const std::string& what) {
  if (end < begin || (end > begin && !bytes))
    throw Error(ErrorKind::Internal, path + ": " + what + ": an empty or reversed byte range");
  if (end - begin > kProtobufMaxMessageBytes)
    bad_field(path, what, begin, std::to_string(end - begin) + " bytes, more than protobuf reads in one message (2 GiB - 1)");
}

}  // namespace

std::vector<ProtoField> split_proto_fields(const uint8_t* bytes, uint64_t begin, uint64_t end, const std::string& path,
                                           const std::string& what) {
  check_span(bytes, begin, end, path, what);
  const int size = static_cast<int>(end - begin);
  CodedInputStream in(bytes + begin, size);
  std::vector<ProtoField> out;
  while (in.CurrentPosition() < size) {
    const int at = in.CurrentPosition();
    const uint32_t tag = in.ReadTag();  // 0: truncated, longer than 5 bytes, or a zero tag
    if (tag == 0) bad_field(path, what, begin + at, "a field tag that is truncated, malformed or 0");
    ProtoField f;
    f.number = static_cast<uint32_t>(WireFormatLite::GetTagFieldNumber(tag));
    f.wire_type = static_cast<uint32_t>(WireFormatLite::GetTagWireType(tag));
    f.begin = begin + at;
    if (f.number == 0) bad_field(path, what, f.begin, "field number 0 (not a valid protobuf field)");
    const std::string field = "field " + std::to_string(f.number);
    const int value_at = in.CurrentPosition();
    f.payload = begin + value_at;
    switch (f.wire_type) {
      case 0: {
        uint64_t v = 0;
        if (!in.ReadVarint64(&v)) bad_field(path, what, f.payload, field + ": a varint that is truncated or longer than 10 bytes");
        f.payload_size = static_cast<uint64_t>(in.CurrentPosition() - value_at);
        break;
      }
      case 1:
      case 5: {
        const int width = f.wire_type == 1 ? 8 : 4;
        if (!in.Skip(width))
          bad_field(path, what, f.payload, field + ": a " + std::to_string(width * 8) + "-bit value needs " + std::to_string(width) +
                                               " bytes, " + std::to_string(size - value_at) + " left in the message");
        f.payload_size = static_cast<uint64_t>(width);
        break;
      }
      case 2: {
        uint64_t length = 0;
        if (!in.ReadVarint64(&length)) bad_field(path, what, f.payload, field + ": a length that is truncated or longer than 10 bytes");
        const int data_at = in.CurrentPosition();
        const uint64_t left = static_cast<uint64_t>(size - data_at);
        if (length > left)
          bad_field(path, what, f.payload, field + ": length " + std::to_string(length) + " runs past the end of the message (" +
                                               std::to_string(left) + " bytes left)");
        in.Skip(static_cast<int>(length));
        f.payload = begin + data_at;
        f.payload_size = length;
        break;
      }
      case 3:
        if (!WireFormatLite::SkipField(&in, tag))
          bad_field(path, what, f.begin, field + ": a group that is malformed, nested too deeply or never closed");
        f.payload_size = static_cast<uint64_t>(in.CurrentPosition() - value_at);
        break;
      default:
        bad_field(path, what, f.begin, field + ": wire type " + std::to_string(f.wire_type) +
                                           (f.wire_type == 4 ? " (the end of a group that was never opened)" : " (not a protobuf wire type)"));
    }
    f.end = begin + static_cast<uint64_t>(in.CurrentPosition());
    out.push_back(f);
  }
  return out;
}

uint64_t count_packed_varints(const uint8_t* bytes, uint64_t begin, uint64_t end, const std::string& path, const std::string& what) {
  check_span(bytes, begin, end, path, what);
  const int size = static_cast<int>(end - begin);
  CodedInputStream in(bytes + begin, size);
  uint64_t n = 0;
  while (in.CurrentPosition() < size) {
    const int at = in.CurrentPosition();
    uint64_t v = 0;
    if (!in.ReadVarint64(&v)) bad_field(path, what, begin + at, "value " + std::to_string(n) + ": a varint that is truncated or longer than 10 bytes");
    ++n;
  }
  return n;
}

}  // namespace tmorph
