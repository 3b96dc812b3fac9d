#include "formats/onnx_types.h"

#include <limits>

namespace tmorph {

namespace {

// onnx.proto (ONNX 1.18): the codes, and for each the typed field the spec names for it.
const OnnxType kOnnxTypes[] = {
    {1, "FLOAT", 32, "float_data", 1, DType::F32},
    {2, "UINT8", 8, "int32_data", 1, DType::U8},
    {3, "INT8", 8, "int32_data", 1, DType::I8},
    {4, "UINT16", 16, "int32_data", 1, DType::U16},
    {5, "INT16", 16, "int32_data", 1, DType::I16},
    {6, "INT32", 32, "int32_data", 1, DType::I32},
    {7, "INT64", 64, "int64_data", 1, DType::I64},
    {8, "STRING", 0, "string_data", 1, std::nullopt},
    {9, "BOOL", 8, "int32_data", 1, DType::BOOL},
    {10, "FLOAT16", 16, "int32_data", 1, DType::F16},
    {11, "DOUBLE", 64, "double_data", 1, DType::F64},
    {12, "UINT32", 32, "uint64_data", 1, DType::U32},
    {13, "UINT64", 64, "uint64_data", 1, DType::U64},
    {14, "COMPLEX64", 64, "float_data", 2, std::nullopt},
    {15, "COMPLEX128", 128, "double_data", 2, std::nullopt},
    {16, "BFLOAT16", 16, "int32_data", 1, DType::BF16},
    {17, "FLOAT8E4M3FN", 8, "int32_data", 1, DType::F8_E4M3FN},
    {18, "FLOAT8E4M3FNUZ", 8, "int32_data", 1, std::nullopt},
    {19, "FLOAT8E5M2", 8, "int32_data", 1, DType::F8_E5M2},
    {20, "FLOAT8E5M2FNUZ", 8, "int32_data", 1, std::nullopt},
    {21, "UINT4", 4, "int32_data", 1, std::nullopt},
    {22, "INT4", 4, "int32_data", 1, std::nullopt},
    {23, "FLOAT4E2M1", 4, "int32_data", 1, std::nullopt},
    {24, "FLOAT8E8M0", 8, "int32_data", 1, std::nullopt},
};

}  // namespace

std::optional<OnnxType> onnx_type(int32_t code) {
  for (const OnnxType& t : kOnnxTypes)
    if (t.code == code) return t;
  return std::nullopt;
}

std::optional<uint64_t> onnx_raw_bytes(const OnnxType& type, uint64_t elements) {
  if (type.bits == 0) return std::nullopt;
  if (type.bits < 8) return elements / 2 + elements % 2;  // two 4-bit values per byte
  const uint64_t width = type.bits / 8;
  if (elements > std::numeric_limits<uint64_t>::max() / width) return std::nullopt;
  return elements * width;
}

}  // namespace tmorph
