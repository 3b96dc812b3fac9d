// Device-side element access for the GPU kernels (backends/gpu): the raw bits of element i and its exact
// value as a double, for every dtype of plugin_abi.h. Conversions are integer arithmetic on the bit
// pattern (no device float conversion, so no flush-to-zero or rounding mode can change a value); every
// value of these dtypes but i64/u64 beyond 2^53 is a double exactly, and those round to nearest even as
// the CPU's static_cast<double> does.
#pragma once

#include <cstdint>
#include <cstring>

#include "gpu_runtime.h"
#include "tensormorph/plugin_abi.h"

namespace tmorph::gpu {

// Element classes: finite, NaN, ±Inf (integers are always finite).
enum : unsigned { kFinite = 0, kNan = 1, kInf = 2 };

__host__ __device__ inline unsigned dtype_width(unsigned dt) {
  switch (dt) {
    case TM_DTYPE_F64: case TM_DTYPE_I64: case TM_DTYPE_U64: return 8;
    case TM_DTYPE_F32: case TM_DTYPE_I32: case TM_DTYPE_U32: return 4;
    case TM_DTYPE_F16: case TM_DTYPE_BF16: case TM_DTYPE_I16: case TM_DTYPE_U16: return 2;
    default: return 1;
  }
}
__host__ __device__ inline bool dtype_is_float(unsigned dt) { return dt >= TM_DTYPE_F64 && dt <= TM_DTYPE_F8_E5M2; }
__host__ __device__ inline bool dtype_is_signed_int(unsigned dt) {
  return dt == TM_DTYPE_I8 || dt == TM_DTYPE_I16 || dt == TM_DTYPE_I32 || dt == TM_DTYPE_I64;
}

__host__ __device__ inline uint64_t load_bits(const unsigned char* data, uint64_t i, unsigned width) {
  switch (width) {
    case 8: return reinterpret_cast<const uint64_t*>(data)[i];
    case 4: return reinterpret_cast<const uint32_t*>(data)[i];
    case 2: return reinterpret_cast<const uint16_t*>(data)[i];
    default: return data[i];
  }
}

__host__ __device__ inline double bits_to_double(uint64_t bits) {
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

__host__ __device__ inline int leading_bit(uint32_t f) {  // index of the highest set bit of f > 0
  int p = 0;
  while (f >> (p + 1)) ++p;
  return p;
}

// A narrow float's layout: mantissa bits, exponent bias, total bits.
__host__ __device__ inline void float_layout(unsigned dt, unsigned* mant, int* bias, unsigned* bits) {
  switch (dt) {
    case TM_DTYPE_F32: *mant = 23, *bias = 127, *bits = 32; return;
    case TM_DTYPE_F16: *mant = 10, *bias = 15, *bits = 16; return;
    case TM_DTYPE_BF16: *mant = 7, *bias = 127, *bits = 16; return;
    case TM_DTYPE_F8_E5M2: *mant = 2, *bias = 15, *bits = 8; return;
    default: *mant = 3, *bias = 7, *bits = 8; return;  // F8_E4M3FN
  }
}

// Element i's value as a double and its class; non-finite values return 0.
__host__ __device__ inline double load_value(const unsigned char* data, uint64_t i, unsigned dt, unsigned* cls) {
  const uint64_t raw = load_bits(data, i, dtype_width(dt));
  *cls = kFinite;
  switch (dt) {
    case TM_DTYPE_F64: {
      const uint64_t mag = raw & 0x7FFFFFFFFFFFFFFFull;
      if ((mag >> 52) == 0x7FF) {
        *cls = (mag & 0xFFFFFFFFFFFFFull) ? kNan : kInf;
        return 0;
      }
      return bits_to_double(raw);
    }
    case TM_DTYPE_I8: return static_cast<double>(static_cast<int8_t>(raw));
    case TM_DTYPE_I16: return static_cast<double>(static_cast<int16_t>(raw));
    case TM_DTYPE_I32: return static_cast<double>(static_cast<int32_t>(raw));
    case TM_DTYPE_I64: return static_cast<double>(static_cast<int64_t>(raw));
    case TM_DTYPE_U8: case TM_DTYPE_U16: case TM_DTYPE_U32: case TM_DTYPE_U64: return static_cast<double>(raw);
    case TM_DTYPE_BOOL: return raw ? 1.0 : 0.0;
    default: break;
  }
  unsigned m, total;
  int bias;
  float_layout(dt, &m, &bias, &total);
  const uint32_t b = static_cast<uint32_t>(raw);
  const uint32_t mag = b & ((total == 32 ? 0x7FFFFFFFu : ((1u << (total - 1)) - 1u)));
  if (dt == TM_DTYPE_F8_E4M3FN) {
    if (mag == 0x7Fu) return *cls = kNan, 0;
  } else {
    const uint32_t exp_ones = (1u << (total - 1 - m)) - 1u;
    if ((mag >> m) == exp_ones) return *cls = (mag & ((1u << m) - 1u)) ? kNan : kInf, 0;
  }
  const uint32_t e = mag >> m, f = mag & ((1u << m) - 1u);
  uint64_t bits = static_cast<uint64_t>(b >> (total - 1)) << 63;
  if (e == 0) {
    if (f == 0) return bits_to_double(bits);  // ±0
    const int p = leading_bit(f);            // subnormal: 1.r * 2^(p + 1 - bias - m)
    bits |= (static_cast<uint64_t>(p + 1 - bias - static_cast<int>(m) + 1023) << 52) |
            ((static_cast<uint64_t>(f) << (52 - p)) & 0xFFFFFFFFFFFFFull);
  } else {
    bits |= (static_cast<uint64_t>(static_cast<int>(e) - bias + 1023) << 52) | (static_cast<uint64_t>(f) << (52 - m));
  }
  return bits_to_double(bits);
}

// An integer (or bool) element's value.
__host__ __device__ inline int64_t load_int(const unsigned char* data, uint64_t i, unsigned dt) {
  const uint64_t raw = load_bits(data, i, dtype_width(dt));
  switch (dt) {
    case TM_DTYPE_I8: return static_cast<int8_t>(raw);
    case TM_DTYPE_I16: return static_cast<int16_t>(raw);
    case TM_DTYPE_I32: return static_cast<int32_t>(raw);
    case TM_DTYPE_BOOL: return raw ? 1 : 0;
    default: return static_cast<int64_t>(raw);
  }
}

// GLSL's min/max (y < x ? y : x): which of +0 and -0 survives is fixed, as in the Vulkan kernels.
__device__ inline double min_of(double x, double y) { return y < x ? y : x; }
__device__ inline double max_of(double x, double y) { return x < y ? y : x; }

}  // namespace tmorph::gpu
