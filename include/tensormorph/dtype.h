// Element types: names, widths and exact decoding of the small float formats.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "tensormorph/plugin_abi.h"

namespace tmorph {

enum class DType : uint32_t {
  F64 = TM_DTYPE_F64, F32 = TM_DTYPE_F32, F16 = TM_DTYPE_F16, BF16 = TM_DTYPE_BF16,
  F8_E4M3FN = TM_DTYPE_F8_E4M3FN, F8_E5M2 = TM_DTYPE_F8_E5M2,
  I8 = TM_DTYPE_I8, I16 = TM_DTYPE_I16, I32 = TM_DTYPE_I32, I64 = TM_DTYPE_I64,
  U8 = TM_DTYPE_U8, U16 = TM_DTYPE_U16, U32 = TM_DTYPE_U32, U64 = TM_DTYPE_U64,
  BOOL = TM_DTYPE_BOOL,
};

// Every dtype, in display order.
inline constexpr DType kAllDTypes[] = {
    DType::F64, DType::F32, DType::F16, DType::BF16, DType::F8_E4M3FN, DType::F8_E5M2,
    DType::I8,  DType::I16, DType::I32, DType::I64,  DType::U8,        DType::U16,
    DType::U32, DType::U64, DType::BOOL};

// Size of one element in bytes.
size_t dtype_size(DType t);
bool dtype_is_float(DType t);
bool dtype_is_signed_int(DType t);
// Canonical lower-case name ("f32", "bf16", "f8_e4m3fn", ...).
std::string_view dtype_name(DType t);
// Accepts the canonical names and common aliases ("float32", "F32", "bfloat16", "float8_e4m3fn", ...).
std::optional<DType> parse_dtype(std::string_view name);
// Bit in a tm_kernel_cap_v1::dtype_mask.
inline uint64_t dtype_bit(DType t) { return 1ull << static_cast<uint32_t>(t); }

// Exact decoders from raw bits to double (every value of these formats is representable in double).
double f16_to_double(uint16_t bits);
double bf16_to_double(uint16_t bits);
double f8_e4m3fn_to_double(uint8_t bits);
double f8_e5m2_to_double(uint8_t bits);
// Value of the element stored in raw little-endian bytes (integers converted to the nearest double).
double element_to_double(DType t, const void* element);

}  // namespace tmorph
