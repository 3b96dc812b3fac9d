#include "tensormorph/dtype.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>

namespace tmorph {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F64: case DType::I64: case DType::U64: return 8;
    case DType::F32: case DType::I32: case DType::U32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: case DType::U16: return 2;
    case DType::F8_E4M3FN: case DType::F8_E5M2: case DType::I8: case DType::U8: case DType::BOOL:
      return 1;
  }
  return 0;
}

bool dtype_is_float(DType t) {
  switch (t) {
    case DType::F64: case DType::F32: case DType::F16: case DType::BF16: case DType::F8_E4M3FN:
    case DType::F8_E5M2:
      return true;
    default:
      return false;
  }
}

bool dtype_is_signed_int(DType t) {
  return t == DType::I8 || t == DType::I16 || t == DType::I32 || t == DType::I64;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F64: return "f64";
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F8_E4M3FN: return "f8_e4m3fn";
    case DType::F8_E5M2: return "f8_e5m2";
    case DType::I8: return "i8";
    case DType::I16: return "i16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U8: return "u8";
    case DType::U16: return "u16";
    case DType::U32: return "u32";
    case DType::U64: return "u64";
    case DType::BOOL: return "bool";
  }
  return "invalid";
}

std::optional<DType> parse_dtype(std::string_view name) {
  std::string n(name);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  static const struct { const char* alias; DType type; } kAliases[] = {
      {"float64", DType::F64}, {"double", DType::F64}, {"float32", DType::F32}, {"float", DType::F32},
      {"float16", DType::F16}, {"half", DType::F16}, {"bfloat16", DType::BF16},
      {"f8_e4m3", DType::F8_E4M3FN}, {"float8_e4m3fn", DType::F8_E4M3FN},
      {"float8_e5m2", DType::F8_E5M2}, {"int8", DType::I8}, {"int16", DType::I16},
      {"int32", DType::I32}, {"int64", DType::I64}, {"uint8", DType::U8}, {"uint16", DType::U16},
      {"uint32", DType::U32}, {"uint64", DType::U64}, {"bool", DType::BOOL}};
  for (DType t : kAllDTypes)
    if (n == dtype_name(t)) return t;
  for (const auto& a : kAliases)
    if (n == a.alias) return a.type;
  return std::nullopt;
}

double f16_to_double(uint16_t bits) {
  const bool negative = bits & 0x8000;
  const int exponent = (bits >> 10) & 0x1F;
  const int mantissa = bits & 0x3FF;
  double magnitude;
  if (exponent == 0x1F) {
    magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -24);
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa | 0x400), exponent - 25);
  }
  return negative ? -magnitude : magnitude;
}

double bf16_to_double(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, sizeof f);
  return f;
}

double f8_e4m3fn_to_double(uint8_t bits) {
  const bool negative = bits & 0x80;
  const int exponent = (bits >> 3) & 0xF;
  const int mantissa = bits & 0x7;
  double magnitude;
  if (exponent == 0xF && mantissa == 0x7) {
    magnitude = std::numeric_limits<double>::quiet_NaN();  // the format has no infinities
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -9);
  } else {
    magnitude = std::ldexp(static_cast<double>(mantissa | 0x8), exponent - 10);
  }
  return negative ? -magnitude : magnitude;
}

double f8_e5m2_to_double(uint8_t bits) {
  // E5M2 is the top byte of an IEEE half.
  return f16_to_double(static_cast<uint16_t>(bits) << 8);
}

double element_to_double(DType t, const void* element) {
  auto load = [&](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, element, sizeof v);
    return v;
  };
  switch (t) {
    case DType::F64: return load(double{});
    case DType::F32: return load(float{});
    case DType::F16: return f16_to_double(load(uint16_t{}));
    case DType::BF16: return bf16_to_double(load(uint16_t{}));
    case DType::F8_E4M3FN: return f8_e4m3fn_to_double(load(uint8_t{}));
    case DType::F8_E5M2: return f8_e5m2_to_double(load(uint8_t{}));
    case DType::I8: return load(int8_t{});
    case DType::I16: return load(int16_t{});
    case DType::I32: return load(int32_t{});
    case DType::I64: return static_cast<double>(load(int64_t{}));
    case DType::U8: return load(uint8_t{});
    case DType::U16: return load(uint16_t{});
    case DType::U32: return load(uint32_t{});
    case DType::U64: return static_cast<double>(load(uint64_t{}));
    case DType::BOOL: return load(uint8_t{}) ? 1.0 : 0.0;
  }
  return 0;
}

}  // namespace tmorph
