// Element access and exact conversion to double for every dtype the Vulkan kernels take.
//
// Contract: a shader that includes this file declares, before the #include,
//   layout(constant_id = 0) const uint DTYPE  (a tm_dtype id, plugin_abi.h)
//   layout(constant_id = 1) const uint WIDTH  (its size in bytes: 1, 2 or 4)
//   a readonly storage buffer holding `uint words[]`: the chunk's elements, little-endian, packed.
// Every conversion is integer arithmetic on the bit pattern, so no denormal flushing or rounding mode of
// the device can change a value: every value of these dtypes is a double exactly.

const uint DT_F32 = 2u, DT_F16 = 3u, DT_BF16 = 4u, DT_F8_E4M3FN = 5u, DT_F8_E5M2 = 6u;
const uint DT_I8 = 7u, DT_I16 = 8u, DT_I32 = 9u, DT_U8 = 11u, DT_U16 = 12u, DT_U32 = 13u, DT_BOOL = 15u;

// Raw bits of element i of the chunk, zero-extended.
uint load_bits(uint i) {
  if (WIDTH == 4u) return words[i];
  if (WIDTH == 2u) return (words[i >> 1] >> ((i & 1u) * 16u)) & 0xFFFFu;
  return (words[i >> 2] >> ((i & 3u) * 8u)) & 0xFFu;
}

bool dtype_is_float(uint dt) { return dt >= DT_F32 && dt <= DT_F8_E5M2; }

// Layout of the small float formats: mantissa bits and exponent bias (width is WIDTH * 8).
uint float_mantissa_bits(uint dt) {
  return dt == DT_F32 ? 23u : dt == DT_F16 ? 10u : dt == DT_BF16 ? 7u : dt == DT_F8_E5M2 ? 2u : 3u;
}
int float_bias(uint dt) {
  return (dt == DT_F32 || dt == DT_BF16) ? 127 : (dt == DT_F16 || dt == DT_F8_E5M2) ? 15 : 7;
}
uint float_magnitude(uint b) { return b & ((1u << (WIDTH * 8u - 1u)) - 1u); }

// 0: finite, 1: NaN, 2: ±Inf. OCP E4M3FN has no infinities; S.1111.111 is its only NaN.
uint float_class(uint dt, uint b) {
  const uint mag = float_magnitude(b);
  if (dt == DT_F8_E4M3FN) return mag == 0x7Fu ? 1u : 0u;
  const uint m = float_mantissa_bits(dt);
  const uint exponent_all_ones = (1u << (WIDTH * 8u - 1u - m)) - 1u;
  if ((mag >> m) != exponent_all_ones) return 0u;
  return (mag & ((1u << m) - 1u)) != 0u ? 1u : 2u;
}

// The value of a finite float's bit pattern, built as the bits of a double.
double float_to_double(uint dt, uint b) {
  const uint m = float_mantissa_bits(dt);
  const int bias = float_bias(dt);
  const uint mag = float_magnitude(b);
  const uint e = mag >> m, f = mag & ((1u << m) - 1u);
  uint64_t bits = uint64_t(b >> (WIDTH * 8u - 1u)) << 63;
  if (e == 0u) {
    if (f == 0u) return uint64BitsToDouble(bits);  // ±0
    // Subnormal: f * 2^(1 - bias - m) = 1.r * 2^(p + 1 - bias - m), p the leading bit of f.
    const int p = findMSB(f);
    bits |= (uint64_t(p + 1 - bias - int(m) + 1023) << 52) | ((uint64_t(f) << uint(52 - p)) & 0xFFFFFFFFFFFFFul);
  } else {
    bits |= (uint64_t(int(e) - bias + 1023) << 52) | (uint64_t(f) << (52u - m));
  }
  return uint64BitsToDouble(bits);
}

// The value of an integer (or bool) bit pattern.
int64_t int_value(uint dt, uint b) {
  if (dt == DT_I8) return int64_t(int(b << 24) >> 24);
  if (dt == DT_I16) return int64_t(int(b << 16) >> 16);
  if (dt == DT_I32) return int64_t(int(b));
  if (dt == DT_BOOL) return b != 0u ? 1l : 0l;
  return int64_t(b);
}

// Element i as a double and its class (0 finite, 1 NaN, 2 ±Inf); integers are always finite.
double load_value(uint i, out uint cls) {
  const uint b = load_bits(i);
  if (dtype_is_float(DTYPE)) {
    cls = float_class(DTYPE, b);
    return cls == 0u ? float_to_double(DTYPE, b) : 0.0lf;
  }
  cls = 0u;
  return double(int_value(DTYPE, b));
}
