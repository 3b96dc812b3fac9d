// What every lod.tile_stats shader shares (op_contracts.h: TM_OP_LOD_TILE_STATS): the tile record the host
// reads, the order bucket of a stored pattern, and a pattern's value.
//
// Contract: a shader that includes this file has included elements.glsl (DTYPE, WIDTH, load_bits and the
// exact conversions) first.

struct Tile {  // tm_tile_stats_v1: 4 counts, 5 float64 values, 256 bucket counts
  uint64_t count, nan_count, inf_count, zero_count;
  double min_v, max_v, abs_max, sum, m2;
  uint buckets[256];
};

double inf() { return uint64BitsToDouble(0x7FF0000000000000ul); }

// The top 8 bits of the order key of a stored pattern (op_contracts.h).
uint order_bucket(uint b) {
  const uint bits = WIDTH * 8u;
  const uint sign = 1u << (bits - 1u);
  const uint mask = bits == 32u ? 0xFFFFFFFFu : (1u << bits) - 1u;
  uint key;
  if (dtype_is_float(DTYPE)) key = (b & sign) != 0u ? (~b & mask) : (b | sign);
  else if (DTYPE == DT_I8 || DTYPE == DT_I16 || DTYPE == DT_I32) key = b ^ sign;
  else key = b;
  return key >> (bits - 8u);
}

// The value of a pattern and its class (0 finite, 1 NaN, 2 +-Inf); integers and bool are finite.
double pattern_value(uint b, out uint cls) {
  if (dtype_is_float(DTYPE)) {
    cls = float_class(DTYPE, b);
    return cls == 0u ? float_to_double(DTYPE, b) : 0.0lf;
  }
  cls = 0u;
  return double(int_value(DTYPE, b));
}

bool finite_at(uint i) {
  uint cls;
  pattern_value(load_bits(i), cls);
  return cls == 0u;
}

// The position of the first finite one of the w elements from element c0 on (w when none). Sixteen elements an
// iteration: lavapipe ends a shader's loops after 65,535 iterations in all, and a tile's row may hold 65,536.
uint first_finite(uint c0, uint w) {
  uint first = w;
#define TM_FIRST_FINITE(k) \
  if (first == w && i + (k) < w && finite_at(c0 + i + (k))) first = i + (k);
  for (uint i = 0u; i < w && first == w; i += 16u) {
    TM_FIRST_FINITE(0u) TM_FIRST_FINITE(1u) TM_FIRST_FINITE(2u) TM_FIRST_FINITE(3u)
    TM_FIRST_FINITE(4u) TM_FIRST_FINITE(5u) TM_FIRST_FINITE(6u) TM_FIRST_FINITE(7u)
    TM_FIRST_FINITE(8u) TM_FIRST_FINITE(9u) TM_FIRST_FINITE(10u) TM_FIRST_FINITE(11u)
    TM_FIRST_FINITE(12u) TM_FIRST_FINITE(13u) TM_FIRST_FINITE(14u) TM_FIRST_FINITE(15u)
  }
#undef TM_FIRST_FINITE
  return first;
}
