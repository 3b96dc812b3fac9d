// ONNX models (formats/onnx.h): models written byte by byte here (a few lines of protobuf encoding, independent
// of the reader's libprotobuf), one per failure mode, each refused with a BadInput naming the file, the field and
// the offset or sizes; and what a well-formed model becomes (offsets into the bytes, metadata, typed fields).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "checkpoint/openers/open_checkpoint.h"
#include "formats/onnx.h"
#include "formats/protobuf_fields.h"
#include "formats/protobuf_values.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace {

// ---- protobuf encoding, for the tests' models ----
std::string onnxt_varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  return s + static_cast<char>(v);
}
std::string onnxt_tag(uint32_t field, uint32_t wire) { return onnxt_varint((static_cast<uint64_t>(field) << 3) | wire); }
std::string onnxt_int(uint32_t field, int64_t v) { return onnxt_tag(field, 0) + onnxt_varint(static_cast<uint64_t>(v)); }
std::string onnxt_bytes(uint32_t field, const std::string& payload) {
  return onnxt_tag(field, 2) + onnxt_varint(payload.size()) + payload;
}
std::string onnxt_floats(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// TensorProto fields: dims = 1, data_type = 2, float_data = 4, int32_data = 5, int64_data = 7, name = 8, raw_data = 9,
// double_data = 10, external_data = 13 (key = 1, value = 2), data_location = 14.
std::string onnxt_tensor(const std::string& name, int32_t type, const std::vector<int64_t>& dims, const std::string& values) {
  std::string t;
  for (int64_t d : dims) t += onnxt_int(1, d);
  return t + onnxt_int(2, type) + onnxt_bytes(8, name) + values;
}
std::string onnxt_raw(const std::string& bytes) { return onnxt_bytes(9, bytes); }
std::string onnxt_external(const std::string& location, const std::string& offset = "", const std::string& length = "") {
  std::string s = onnxt_bytes(13, onnxt_bytes(1, "location") + onnxt_bytes(2, location));
  if (!offset.empty()) s += onnxt_bytes(13, onnxt_bytes(1, "offset") + onnxt_bytes(2, offset));
  if (!length.empty()) s += onnxt_bytes(13, onnxt_bytes(1, "length") + onnxt_bytes(2, length));
  return s + onnxt_int(14, 1);
}
// ModelProto: ir_version = 1, producer_name = 2, graph = 7 (GraphProto: node = 1, name = 2, initializer = 5),
// opset_import = 8 (domain = 1, version = 2), metadata_props = 14.
std::string onnxt_model(const std::vector<std::string>& tensors, const std::string& extra_graph = "") {
  std::string graph = onnxt_bytes(1, onnxt_bytes(4, "Add")) + onnxt_bytes(2, "g");
  for (const auto& t : tensors) graph += onnxt_bytes(5, t);
  return onnxt_int(1, 8) + onnxt_bytes(2, "unit") + onnxt_bytes(8, onnxt_int(2, 17)) + onnxt_bytes(7, graph + extra_graph) +
         onnxt_bytes(14, onnxt_bytes(1, "k") + onnxt_bytes(2, "v"));
}

OnnxModel onnxt_parse(const std::string& bytes) {
  return parse_onnx(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "m.onnx");
}

std::string onnxt_error(const std::string& bytes) {
  try {
    onnxt_parse(bytes);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("m.onnx: ", 0), 0u) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a BadInput error";
  return "";
}

const std::string kOnnxtF32 = onnxt_floats({1.5f, -2.0f});

TEST(OnnxModel, RawDataStaysInPlaceAndMetadataIsRead) {
  const std::string bytes = onnxt_model({onnxt_tensor("w", 1, {2}, onnxt_raw(kOnnxtF32))});
  const OnnxModel m = onnxt_parse(bytes);
  ASSERT_EQ(m.tensors.size(), 1u);
  const OnnxTensor& t = m.tensors[0];
  EXPECT_EQ(t.name, "w");
  EXPECT_EQ(t.stored_type, "FLOAT");
  EXPECT_EQ(t.dtype, DType::F32);
  EXPECT_EQ(t.shape, (std::vector<uint64_t>{2}));
  EXPECT_EQ(t.bytes, 8u);
  EXPECT_EQ(bytes.substr(t.offset, 8), kOnnxtF32);  // an offset into the model's bytes, not a copy
  EXPECT_EQ(m.header_bytes, t.offset);
  std::map<std::string, std::string> meta(m.metadata.begin(), m.metadata.end());
  EXPECT_EQ(meta["onnx.ir_version"], "8");
  EXPECT_EQ(meta["onnx.producer_name"], "unit");
  EXPECT_EQ(meta["onnx.opset_import"], "ai.onnx 17");
  EXPECT_EQ(meta["onnx.graph.nodes"], "1");
  EXPECT_EQ(meta["onnx.graph.op_types"], "Add 1");
  EXPECT_EQ(meta["k"], "v");
}

TEST(OnnxModel, EveryPrefixIsReadOrRefusedCleanly) {
  const std::string bytes = onnxt_model({onnxt_tensor("w", 1, {2}, onnxt_raw(kOnnxtF32)),
                                         onnxt_tensor("e", 7, {1}, onnxt_external("d.bin", "0", "8"))});
  for (size_t n = 0; n < bytes.size(); ++n) {
    try {
      const OnnxModel m = onnxt_parse(bytes.substr(0, n));
      for (const auto& t : m.tensors) {
        if (!t.external) {
          EXPECT_LE(t.offset + t.bytes, n);
        }
      }
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput) << e.what();
    }
  }
  EXPECT_NE(onnxt_error(bytes.substr(0, bytes.size() - 9)).find("runs past the end of the message"), std::string::npos);
}

TEST(OnnxModel, MalformedWireIsRefusedWithItsOffset) {
  EXPECT_NE(onnxt_error("\x08").find("ModelProto at offset 1: field 1: a varint that is truncated"), std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_tag(3, 7)).find("wire type 7"), std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_tag(3, 4)).find("the end of a group that was never opened"), std::string::npos);
  EXPECT_NE(onnxt_error(std::string("\x00", 1)).find("field tag that is truncated, malformed or 0"), std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_int(7, 3)).find("ModelProto.graph at offset 0 is not a message"), std::string::npos);
  // A damaged nested message is refused by the generated parser, naming the field (a known field with another
  // wire type is an unknown field to protobuf, and skipped).
  EXPECT_NE(onnxt_error(onnxt_int(1, 8) + onnxt_bytes(8, "\x0f")).find("field 8 at offset 2 does not parse as ONNX's ModelProto"),
            std::string::npos);
  EXPECT_EQ(onnxt_parse(onnxt_int(2, 5)).tensors.size(), 0u);
  // A group of an unknown field is skipped, as protobuf skips it.
  const std::string group = onnxt_tag(99, 3) + onnxt_int(1, 5) + onnxt_tag(99, 4);
  EXPECT_EQ(onnxt_parse(group + onnxt_model({})).tensors.size(), 0u);
  // More than protobuf reads in one message: refused before any byte is read.
  const char tiny[1] = {};
  try {
    parse_onnx(reinterpret_cast<const uint8_t*>(tiny), uint64_t{1} << 31, "m.onnx");
    ADD_FAILURE() << "a 2 GiB model was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than one protobuf message may hold"), std::string::npos) << e.what();
  }
}

TEST(OnnxModel, SizesThatDisagreeWithTheShapeAreRefused) {
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 1, {3}, onnxt_raw(kOnnxtF32))}))
                .find("graph.initializer[0] 'w': raw_data at offset "),
            std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 1, {3}, onnxt_raw(kOnnxtF32))})).find("holds 8 bytes; shape [3] of FLOAT needs 12"),
            std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 1, {2, -1}, onnxt_raw(kOnnxtF32))})).find("dims[1] is -1"), std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 1, {1LL << 40, 1LL << 40}, onnxt_raw(kOnnxtF32))})).find("overflows 64 bits"),
            std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 1, {1LL << 62, 2}, onnxt_raw(kOnnxtF32))})).find("overflow 64 bits of bytes"),
            std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 1, {3}, onnxt_bytes(4, kOnnxtF32))})).find("float_data holds 2 values; shape [3]"),
            std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 1, {1}, onnxt_bytes(4, "abc"))})).find("not a whole number of 4-byte values"),
            std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 1, {4}, "")})).find("4 elements but no values"), std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 1, {2}, onnxt_raw(kOnnxtF32) + onnxt_bytes(4, kOnnxtF32))}))
                .find("holds its values in both raw_data and float_data"),
            std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 7, {2}, onnxt_bytes(4, kOnnxtF32))}))
                .find("values in float_data, but INT64 keeps them in int64_data"),
            std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 7, {2}, onnxt_bytes(7, "\x80"))})).find("a varint that is truncated"),
            std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 8, {1}, onnxt_raw("x"))})).find("raw_data is not allowed for STRING"), std::string::npos);
}

TEST(OnnxModel, NamesAndTypesAreChecked) {
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("", 1, {2}, onnxt_raw(kOnnxtF32))})).find("graph.initializer[0] has no name"),
            std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("a", 1, {2}, onnxt_raw(kOnnxtF32)), onnxt_tensor("a", 1, {2}, onnxt_raw(kOnnxtF32))}))
                .find("graph.initializer[1] 'a' repeats the name of graph.initializer[0]"),
            std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("a\xff", 1, {2}, onnxt_raw(kOnnxtF32))})).find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("a", 0, {2}, onnxt_raw(kOnnxtF32))})).find("data_type is missing or 0"), std::string::npos);
  // A code this reader does not know is listed, not refused; a known type without a kernel likewise.
  const OnnxModel m = onnxt_parse(onnxt_model({onnxt_tensor("future", 99, {2}, onnxt_raw(kOnnxtF32)),
                                               onnxt_tensor("c", 14, {1}, onnxt_raw(kOnnxtF32)),
                                               onnxt_tensor("q", 22, {3}, onnxt_raw("ab"))}));
  EXPECT_EQ(m.tensors[0].stored_type, "data_type 99");
  EXPECT_NE(m.tensors[0].unavailable_reason.find("not an ONNX element type this reader knows"), std::string::npos);
  EXPECT_EQ(m.tensors[1].unavailable_reason, "no kernel yet for ONNX COMPLEX64");
  EXPECT_EQ(m.tensors[2].unavailable_reason, "no kernel yet for ONNX INT4");  // 3 four-bit values in 2 bytes
  EXPECT_FALSE(m.tensors[2].dtype.has_value());
}

TEST(OnnxModel, TypedFieldsInPlaceOrDecoded) {
  const std::string packed = onnxt_tensor("packed", 1, {2}, onnxt_bytes(4, kOnnxtF32));
  std::string unpacked_values;
  for (float f : {1.5f, -2.0f}) unpacked_values += onnxt_tag(4, 5) + onnxt_floats({f});
  const std::string unpacked = onnxt_tensor("unpacked", 1, {2}, unpacked_values);
  const std::string ints = onnxt_tensor("ints", 7, {3}, onnxt_bytes(7, onnxt_varint(1) + onnxt_varint(300) + onnxt_varint(~0ull)));
  const std::string strings = onnxt_tensor("s", 8, {1}, onnxt_bytes(6, "ab"));
  const std::string bytes = onnxt_model({packed, unpacked, ints, strings});
  const OnnxModel m = onnxt_parse(bytes);
  ASSERT_EQ(m.tensors.size(), 4u);
  EXPECT_EQ(m.tensors[0].dtype, DType::F32);
  EXPECT_EQ(m.tensors[0].field, "float_data");
  EXPECT_FALSE(m.tensors[0].encoded);  // one packed record: in place
  EXPECT_EQ(bytes.substr(m.tensors[0].offset, 8), kOnnxtF32);
  // Two unpacked fixed32 records: two runs of little-endian values, decoded by copying them in order.
  const auto decoded = [&](const OnnxTensor& t) {
    EXPECT_TRUE(t.encoded && t.dtype) << t.name;
    if (!t.encoded || !t.dtype) return std::string();
    std::string out(t.elements * dtype_size(*t.dtype), '\0');
    decode_values(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), *t.encoded, *t.dtype, t.elements,
                  reinterpret_cast<uint8_t*>(out.data()), "m.onnx", t.name);
    return out;
  };
  EXPECT_EQ(m.tensors[1].dtype, DType::F32);
  EXPECT_EQ(m.tensors[1].encoded->encoding, ValueEncoding::LittleEndian);
  EXPECT_EQ(m.tensors[1].encoded->runs.size(), 2u);
  EXPECT_EQ(decoded(m.tensors[1]), kOnnxtF32);
  // int64_data varints: two's complement int64, the 10-byte varint of ~0 is -1.
  EXPECT_EQ(m.tensors[2].dtype, DType::I64);
  EXPECT_EQ(m.tensors[2].bytes, 1u + 2u + 10u);  // as encoded
  const int64_t want[] = {1, 300, -1};
  EXPECT_EQ(decoded(m.tensors[2]), std::string(reinterpret_cast<const char*>(want), sizeof want));
  EXPECT_EQ(m.tensors[3].unavailable_reason, "no kernel yet for ONNX STRING");
  EXPECT_EQ(m.header_bytes, m.tensors[0].offset);
}

// int32_data holds every small type as one varint per element: signed types sign-extended (a negative value is a
// 10-byte varint), unsigned types and BOOL zero-extended, FLOAT16/BFLOAT16/FLOAT8 as their bits.
TEST(OnnxModel, VarintsDecodeToEachTypesBytes) {
  const auto ints = [](std::initializer_list<int64_t> v) {
    std::string s;
    for (int64_t x : v) s += onnxt_varint(static_cast<uint64_t>(x));
    return s;
  };
  const auto le = [](std::initializer_list<int64_t> v, size_t width) {
    std::string s;
    for (int64_t x : v)
      for (size_t b = 0; b < width; ++b) s += static_cast<char>(static_cast<uint64_t>(x) >> (8 * b));
    return s;
  };
  struct Case {
    int32_t type;
    uint32_t field;
    std::initializer_list<int64_t> values;
    DType dtype;
  };
  const Case cases[] = {
      {3, 5, {-128, 0, 127, -1}, DType::I8},          {2, 5, {0, 255, 1}, DType::U8},
      {5, 5, {-32768, 0, 32767}, DType::I16},         {4, 5, {0, 65535}, DType::U16},
      {6, 5, {INT32_MIN, 0, INT32_MAX}, DType::I32},  {9, 5, {1, 0}, DType::BOOL},
      {10, 5, {0xfbff, 0x8000, 0x3c00}, DType::F16},  {16, 5, {0xff80, 0x7f7f, 0}, DType::BF16},
      {17, 5, {0xfe, 0x7e, 0x80}, DType::F8_E4M3FN},  {19, 5, {0xfb, 0x7c, 1}, DType::F8_E5M2},
      {7, 7, {INT64_MIN, 0, INT64_MAX}, DType::I64},  {12, 11, {0, 0xffffffff}, DType::U32},
      {13, 11, {0, -1}, DType::U64},  // uint64_data: ~0 is UINT64's max
  };
  for (const Case& c : cases) {
    const std::string bytes = onnxt_model({onnxt_tensor("t", c.type, {static_cast<int64_t>(c.values.size())}, onnxt_bytes(c.field, ints(c.values)))});
    const OnnxTensor t = onnxt_parse(bytes).tensors.at(0);
    ASSERT_EQ(t.dtype, c.dtype) << t.stored_type;
    ASSERT_TRUE(t.encoded);
    std::string out(t.elements * dtype_size(c.dtype), '\0');
    decode_values(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), *t.encoded, c.dtype, t.elements,
                  reinterpret_cast<uint8_t*>(out.data()), "m.onnx", "t");
    EXPECT_EQ(out, le(c.values, dtype_size(c.dtype))) << t.stored_type;
  }
}

TEST(OnnxModel, VarintsThatDoNotFitTheirTypeAreRefused) {
  const auto refused = [](int32_t type, uint32_t field, int64_t value) {
    return onnxt_error(onnxt_model({onnxt_tensor("w", type, {2}, onnxt_bytes(field, onnxt_varint(0) + onnxt_varint(static_cast<uint64_t>(value))))}));
  };
  const std::string u8 = refused(2, 5, 300);
  EXPECT_NE(u8.find("graph.initializer[0] 'w': int32_data: value 1 at offset "), std::string::npos) << u8;
  EXPECT_NE(u8.find(" is 300, outside u8's range 0 .. 255"), std::string::npos) << u8;
  EXPECT_NE(refused(9, 5, 2).find("is 2, outside bool's range 0 .. 1"), std::string::npos);
  EXPECT_NE(refused(2, 5, -1).find("is -1, outside u8's"), std::string::npos);
  EXPECT_NE(refused(3, 5, -129).find("is -129, outside i8's range -128 .. 127"), std::string::npos);
  EXPECT_NE(refused(6, 5, int64_t{1} << 31).find("is 2147483648, outside i32's"), std::string::npos);
  EXPECT_NE(refused(10, 5, 65536).find("is 65536, outside f16's range 0 .. 65535"), std::string::npos);
  EXPECT_NE(refused(12, 11, int64_t{1} << 32).find("is 4294967296, outside u32's range 0 .. 4294967295"), std::string::npos);
  // A packed run that holds more varints than the shape's elements, and one cut short.
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 2, {1}, onnxt_bytes(5, onnxt_varint(1) + onnxt_varint(2)))})).find("holds 2 values"),
            std::string::npos);
}

TEST(OnnxModel, ExternalDataIsCheckedBeforeAnyFileIsOpened) {
  const auto ext = [](const std::string& loc, const std::string& off, const std::string& len) {
    return onnxt_model({onnxt_tensor("w", 1, {2}, onnxt_external(loc, off, len))});
  };
  const OnnxModel m = onnxt_parse(ext("sub/w.bin", "16", "8"));
  EXPECT_TRUE(m.tensors[0].external);
  EXPECT_EQ(m.tensors[0].location, "sub/w.bin");
  EXPECT_EQ(m.tensors[0].offset, 16u);
  EXPECT_EQ(m.tensors[0].bytes, 8u);
  EXPECT_NE(onnxt_error(ext("/etc/passwd", "", "")).find("an absolute path"), std::string::npos);
  EXPECT_NE(onnxt_error(ext("../w.bin", "", "")).find("climbs out of the model's folder"), std::string::npos);
  EXPECT_NE(onnxt_error(ext("a/../../w.bin", "", "")).find("climbs out of the model's folder"), std::string::npos);
  EXPECT_NE(onnxt_error(ext("a\\..\\..\\w.bin", "", "")).find("climbs out of the model's folder"), std::string::npos);
  EXPECT_NE(onnxt_error(ext("", "", "")).find("location '': empty"), std::string::npos);
  EXPECT_NE(onnxt_error(ext("w.bin", "-4", "")).find("external_data offset '-4' is not a non-negative decimal integer"), std::string::npos);
  EXPECT_NE(onnxt_error(ext("w.bin", "99999999999999999999999", "")).find("offset"), std::string::npos);
  EXPECT_NE(onnxt_error(ext("w.bin", "0", "12")).find("external_data length 12; shape [2] of FLOAT needs 8 bytes"), std::string::npos);
  EXPECT_NE(onnxt_error(ext("w.bin", "18446744073709551610", "")).find("overflows 64 bits"), std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 1, {2}, onnxt_int(14, 1))})).find("has no location"), std::string::npos);
  EXPECT_NE(onnxt_error(onnxt_model({onnxt_tensor("w", 1, {2}, onnxt_raw(kOnnxtF32) + onnxt_external("w.bin"))}))
                .find("both raw_data and external data"),
            std::string::npos);
  // The range against its file: inside, or refused naming both files.
  EXPECT_NO_THROW(check_onnx_external_range(m.tensors[0], 24, "m.onnx", "sub/w.bin"));
  try {
    check_onnx_external_range(m.tensors[0], 23, "m.onnx", "sub/w.bin");
    ADD_FAILURE() << "a range past the end of its file was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("external data offset 16 + 8 bytes runs past the end of sub/w.bin (23 bytes)"), std::string::npos)
        << e.what();
  }
}

TEST(OnnxModel, OpenerMapsExternalFilesAndRefusesMissingOnes) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("tm-onnx-unit-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "sub");
  const auto write = [](const std::filesystem::path& p, const std::string& s) {
    std::ofstream(p, std::ios::binary).write(s.data(), static_cast<std::streamsize>(s.size()));
  };
  write(dir / "m.onnx", onnxt_model({onnxt_tensor("w", 1, {2}, onnxt_external("sub/w.bin", "4", "8")),
                                     onnxt_tensor("v", 1, {1}, onnxt_external("sub/w.bin", "0"))}));
  write(dir / "sub" / "w.bin", std::string(4, '\0') + kOnnxtF32);
  const Checkpoint c = open_checkpoint((dir / "m.onnx").string());
  EXPECT_EQ(c.format, "onnx");
  ASSERT_EQ(c.files.size(), 2u);  // the model and its one data file, mapped once
  ASSERT_EQ(c.tensors.size(), 2u);
  EXPECT_EQ(c.tensors[0].file_index, 1u);
  EXPECT_EQ(std::memcmp(c.data(c.tensors[0]), kOnnxtF32.data(), 8), 0);
  // Varints decoded through the model: data(t) and in_place(t) give the decoded copy, not the file's bytes.
  write(dir / "ints.onnx", onnxt_model({onnxt_tensor("i8", 3, {3}, onnxt_bytes(5, onnxt_varint(~0ull) + onnxt_varint(5) + onnxt_varint(~127ull)))}));
  const Checkpoint ic = open_checkpoint((dir / "ints.onnx").string());
  ASSERT_EQ(ic.tensors.at(0).dtype, DType::I8);
  const int8_t want[] = {-1, 5, -128};
  EXPECT_EQ(std::memcmp(ic.data(ic.tensors[0]), want, 3), 0);
  EXPECT_FALSE(ic.in_place(ic.tensors[0]).file);
  EXPECT_EQ(ic.in_place(ic.tensors[0]).first, ic.data(ic.tensors[0]));
  write(dir / "short.onnx", onnxt_model({onnxt_tensor("w", 1, {4}, onnxt_external("sub/w.bin", "4"))}));
  try {
    open_checkpoint((dir / "short.onnx").string());
    ADD_FAILURE() << "a tensor past the end of its data file was opened";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runs past the end of"), std::string::npos) << e.what();
  }
  write(dir / "gone.onnx", onnxt_model({onnxt_tensor("w", 1, {2}, onnxt_external("missing.bin"))}));
  try {
    open_checkpoint((dir / "gone.onnx").string());
    ADD_FAILURE() << "a missing external data file was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("missing.bin') is missing"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tmorph
