// A protobuf message's fields as they lie in its bytes, found with protobuf's own wire reader
// (io::CodedInputStream and WireFormatLite::SkipField of libprotobuf-lite): where each field starts and ends and,
// for a length-delimited field, where its payload lies. The ONNX reader (formats/onnx.h) uses it to hand the
// generated classes every field but the bulk payloads, whose offsets it keeps instead: a generated parser
// copies a bytes field, and a tensor's raw_data must stay in place in the mapped file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tmorph {

// Messages larger than this cannot be read by protobuf (its sizes and positions are int); ONNX writers
// refuse to write them (weights beyond 2 GB go to external data files).
inline constexpr uint64_t kProtobufMaxMessageBytes = 0x7fffffffu;

struct ProtoField {
  uint32_t number = 0;
  uint32_t wire_type = 0;        // 0 varint, 1 fixed64, 2 length-delimited, 3 group, 5 fixed32
  uint64_t begin = 0, end = 0;   // the whole field, tag included, as offsets from the start of the bytes
  uint64_t payload = 0;          // length-delimited: the first payload byte; otherwise the value's first byte
  uint64_t payload_size = 0;     // length-delimited: the payload's size; otherwise the value's encoded size
};

// The fields of the message at bytes[begin, end), in file order. A tag, varint, length or group that is
// malformed or runs past `end` is a BadInput error "<path>: <what> at offset N: ..." (`what` names the
// message, e.g. "ModelProto.graph (GraphProto)"). end - begin must be at most kProtobufMaxMessageBytes.
std::vector<ProtoField> split_proto_fields(const uint8_t* bytes, uint64_t begin, uint64_t end, const std::string& path,
                                           const std::string& what);

// The number of varints in the packed payload bytes[begin, end) (a packed repeated int32/int64/uint64
// field); BadInput naming `what` and the offset when one is truncated or longer than 10 bytes.
uint64_t count_packed_varints(const uint8_t* bytes, uint64_t begin, uint64_t end, const std::string& path, const std::string& what);

}  // namespace tmorph
