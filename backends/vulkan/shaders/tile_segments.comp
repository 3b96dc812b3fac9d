#version 450
// TM_OP_LOD_TILE_STATS, method TM_TILE_SEGMENTS (op_contracts.h) for f32, bf16 and f16, bit-identical to the CPU
// reference (backends/cpu/tile_kernels.cpp): one workgroup per tile of a band of pc.rows x pc.cols elements,
// tiles pc.tile_cols wide, and invocation l is the CPU's float64 lane l.
//  - The shift: the mean of the finite values of the tile's first segment (its part of the band's first row),
//    summed in element order in float64 by invocation 0, rounded to f32.
//  - Every segment (one row's part of the tile): its element i feeds lane i % 16, rows in order, so each lane
//    adds its elements in the CPU's order: sum += d and sq = fma(d, d, sq) with d = x - shift. The CPU's
//    multiply-add is fused, and Vulkan's fma() need not be (its precision is a multiply then an add), so the
//    fused result is computed exactly from error-free transformations (fused_square_add); everything is
//    `precise`, so nothing is fused or reassociated behind our back.
//  - Lane extremes follow the CPU's two comparison rules, which differ only in the sign of a zero extreme:
//    elements of a segment's whole groups of 16 take the SIMD rule (min(a, b) = a < b ? a : b), a segment's
//    tail (and all of a segment shorter than 16) the scalar rule (std::min(a, b) = b < a ? b : a).
//  - Invocation 0 reduces the lanes in lane order as finish_tile does. Counts and order buckets are exact.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 16) in;
layout(constant_id = 0) const uint DTYPE = 2u;
layout(constant_id = 1) const uint WIDTH = 4u;

layout(std430, binding = 0) readonly buffer Input { uint words[]; };

layout(push_constant) uniform Push {
  uint rows;       // rows of the launch's band
  uint cols;       // its columns (whole tiles, the last one possibly short)
  uint tile_cols;  // tile width
  uint unused;
} pc;

#include "elements.glsl"
#include "tile_record.glsl"

layout(std430, binding = 1) buffer Output {
  uint totals[256];  // unused here: the layout every lod.tile_stats shader's output shares
  Tile tiles[];
};

const uint LANES = 16u;

// a + b = s + err exactly (Knuth's two-sum).
double two_sum(double a, double b, out double err) {
  precise const double s = a + b;
  precise const double bb = s - a;
  precise const double e = (a - (s - bb)) + (b - bb);
  err = e;
  return s;
}

// a x a = p + err exactly (Dekker's product with Veltkamp's split; |a| < 2^996, and |a| >= 2^-480 or a = 0
// so that err does not underflow: a difference of f32 values, or 0).
double exact_square(double a, out double err) {
  precise const double p = a * a;
  precise const double c = 134217729.0lf * a;  // 2^27 + 1
  precise const double hi = c - (c - a);
  precise const double lo = a - hi;
  precise const double e = ((hi * hi - p) + 2.0lf * hi * lo) + lo * lo;
  err = e;
  return p;
}

// a + b rounded to odd: the nearest double when exact, else of its two neighbours the one whose last bit is 1.
double sum_rounded_to_odd(double a, double b) {
  double err;
  const double s = two_sum(a, b, err);
  uint64_t bits = doubleBitsToUint64(s);
  if (err == 0.0lf || (bits & 1ul) != 0ul) return s;
  // s (not 0: a + b was inexact) is even: its other neighbour lies toward the exact sum, on err's side.
  bits = (err > 0.0lf) == (s > 0.0lf) ? bits + 1ul : bits - 1ul;
  return uint64BitsToDouble(bits);
}

// fma(d, d, c) rounded once, as the CPU's fused multiply-add gives it (Boldo and Melquiond's emulation of an
// FMA by rounding to odd, exact without underflow or overflow).
double fused_square_add(double d, double c) {
  double ul, tl;
  const double uh = exact_square(d, ul);
  const double th = two_sum(c, uh, tl);
  precise const double z = th + sum_rounded_to_odd(tl, ul);
  return z;
}

shared uint s_buckets[256];
shared double s_shift;
shared double s_sum[LANES], s_sq[LANES], s_lo[LANES], s_hi[LANES], s_am[LANES];
shared uint s_fin[LANES], s_nan[LANES], s_zero[LANES];

void main() {
  const uint lane = gl_LocalInvocationID.x;
  const uint tile = gl_WorkGroupID.x;
  const uint c0 = tile * pc.tile_cols;
  const uint w = min(pc.cols, c0 + pc.tile_cols) - c0;
  for (uint k = lane; k < 256u; k += LANES) s_buckets[k] = 0u;
  if (lane == 0u) {
    precise double first_sum = 0.0lf;
    uint first_finite = 0u;
    // Sixteen elements an iteration: lavapipe ends a shader's loops after 65,535 iterations in all.
#define TM_ADD_FIRST(i)                                       \
    {                                                         \
      uint cls_;                                              \
      const double v_ = pattern_value(load_bits(c0 + (i)), cls_); \
      if (cls_ == 0u) {                                       \
        first_sum += v_;                                      \
        ++first_finite;                                       \
      }                                                       \
    }
    const uint whole = w / 16u * 16u;
    for (uint i = 0u; i < whole; i += 16u) {
      TM_ADD_FIRST(i) TM_ADD_FIRST(i + 1u) TM_ADD_FIRST(i + 2u) TM_ADD_FIRST(i + 3u)
      TM_ADD_FIRST(i + 4u) TM_ADD_FIRST(i + 5u) TM_ADD_FIRST(i + 6u) TM_ADD_FIRST(i + 7u)
      TM_ADD_FIRST(i + 8u) TM_ADD_FIRST(i + 9u) TM_ADD_FIRST(i + 10u) TM_ADD_FIRST(i + 11u)
      TM_ADD_FIRST(i + 12u) TM_ADD_FIRST(i + 13u) TM_ADD_FIRST(i + 14u) TM_ADD_FIRST(i + 15u)
    }
    for (uint i = whole; i < w; ++i) TM_ADD_FIRST(i)
    s_shift = first_finite > 0u ? double(float(first_sum / double(first_finite))) : 0.0lf;
  }
  barrier();
  const double shift = s_shift;
  const uint grouped = w >= LANES ? w / LANES * LANES : 0u;  // a segment's elements in whole groups of 16
  precise double sum = 0.0lf, sq = 0.0lf;
  double lo = inf(), hi = -inf(), am = 0.0lf;
  uint fin = 0u, nan = 0u, zero = 0u;
  for (uint r = 0u; r < pc.rows; ++r) {
    const uint first = r * pc.cols + c0;
    for (uint i = lane; i < w; i += LANES) {
      const uint b = load_bits(first + i);
      uint cls;
      const double x = pattern_value(b, cls);
      nan += cls == 1u ? 1u : 0u;
      if (cls != 0u) continue;
      zero += x == 0.0lf ? 1u : 0u;
      ++fin;
      const double a = abs(x);
      if (i < grouped) {
        lo = lo < x ? lo : x;
        hi = hi > x ? hi : x;
        am = am > a ? am : a;
      } else {
        lo = x < lo ? x : lo;
        hi = hi < x ? x : hi;
        am = am < a ? a : am;
      }
      precise const double d = x - shift;
      sum += d;
      sq = fused_square_add(d, sq);
      atomicAdd(s_buckets[order_bucket(b)], 1u);
    }
  }
  s_sum[lane] = sum, s_sq[lane] = sq, s_lo[lane] = lo, s_hi[lane] = hi, s_am[lane] = am;
  s_fin[lane] = fin, s_nan[lane] = nan, s_zero[lane] = zero;
  barrier();
  if (lane == 0u) {
    uint finite = 0u, nans = 0u, zeros = 0u;
    for (uint l = 0u; l < LANES; ++l) finite += s_fin[l], nans += s_nan[l], zeros += s_zero[l];
    const uint64_t count = uint64_t(pc.rows) * uint64_t(w);
    tiles[tile].count = count, tiles[tile].nan_count = uint64_t(nans), tiles[tile].zero_count = uint64_t(zeros);
    tiles[tile].inf_count = count - uint64_t(finite) - uint64_t(nans);
    double t_min = inf(), t_max = -inf(), t_am = 0.0lf;
    precise double t_sum = 0.0lf, t_m2 = 0.0lf;
    if (finite > 0u) {
      precise double s = 0.0lf, q = 0.0lf;
      for (uint l = 0u; l < LANES; ++l) {
        s += s_sum[l];
        q += s_sq[l];
        t_min = s_lo[l] < t_min ? s_lo[l] : t_min;
        t_max = t_max < s_hi[l] ? s_hi[l] : t_max;
        t_am = t_am < s_am[l] ? s_am[l] : t_am;
      }
      precise const double n = double(finite);
      t_sum = s + shift * n;
      precise const double m2 = q - s * s / n;
      t_m2 = 0.0lf < m2 ? m2 : 0.0lf;
    }
    tiles[tile].min_v = t_min, tiles[tile].max_v = t_max, tiles[tile].abs_max = t_am;
    tiles[tile].sum = t_sum, tiles[tile].m2 = t_m2;
  }
  barrier();
  for (uint k = lane; k < 256u; k += LANES) tiles[tile].buckets[k] = s_buckets[k];
}
