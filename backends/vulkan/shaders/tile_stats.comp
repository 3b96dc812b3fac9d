#version 450
// TM_OP_LOD_TILE_STATS (op_contracts.h), bit-identical to the CPU reference (backends/cpu/widened_tiles.cpp and
// pattern_tiles.cpp): one workgroup per tile of a band of pc.rows x pc.cols elements, tiles pc.tile_cols wide.
//  - METHOD 2 (TM_TILE_WIDENED, every dtype here): row after row, invocation l adds the row segment's elements
//    l, l+8, ... in order into its lane (the CPU's 8 lanes), invocation 0 reduces the lanes in order and merges
//    the row into the tile by Chan's update, with the CPU's comparisons written out (std::min(a, b) is
//    b < a ? b : a), so even the sign of a zero extreme agrees.
//  - METHOD 0 (TM_TILE_PATTERNS, 8-bit dtypes): the tile's 256 patterns counted (shared atomics, exact), then
//    invocation 0 scans them in pattern order as the CPU's table scan does, and adds them to the totals.
// Accumulators are `precise`: no fused multiply-add, no reassociation. Order buckets are counted exactly.
// TM_TILE_SEGMENTS is tile_segments.comp, the 16-bit pattern scan tile_patterns16.comp.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 8) in;
layout(constant_id = 0) const uint DTYPE = 2u;
layout(constant_id = 1) const uint WIDTH = 4u;
layout(constant_id = 2) const uint METHOD = 2u;

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
  uint totals[256];  // METHOD 0: the launch's count of every pattern (zeroed by the host first)
  Tile tiles[];
};

const uint LANES = 8u;

shared uint s_buckets[256];
shared double s_sum[LANES], s_sq[LANES], s_lo[LANES], s_hi[LANES], s_am[LANES];
shared uint s_fin[LANES], s_nan[LANES], s_zero[LANES];

void write_buckets(uint tile, uint lane) {
  for (uint k = lane; k < 256u; k += LANES) tiles[tile].buckets[k] = s_buckets[k];
}

void widened(uint tile, uint c0, uint w, uint lane) {
  // The running tile (invocation 0): lod's TileStats of no element.
  uint64_t count = 0ul, nans = 0ul, infs = 0ul, zeros = 0ul;
  precise double t_min = inf(), t_max = -inf(), t_am = 0.0lf, t_sum = 0.0lf, t_m2 = 0.0lf;
  for (uint r = 0u; r < pc.rows; ++r) {
    const uint first = r * pc.cols + c0;
    uint c_cls;
    const double v0 = pattern_value(load_bits(first), c_cls);
    const double c = c_cls == 0u ? v0 : 0.0lf;
    precise double sum = 0.0lf, sq = 0.0lf;
    double mn = inf(), mx = -inf(), am = 0.0lf;
    uint fin = 0u, nan = 0u, zero = 0u;
    for (uint i = lane; i < w; i += LANES) {
      const uint b = load_bits(first + i);
      uint cls;
      const double x = pattern_value(b, cls);
      const bool f = cls == 0u;
      precise const double d = f ? x - c : 0.0lf;
      const double lo = f ? x : inf(), hi = f ? x : -inf(), a = f ? abs(x) : 0.0lf;
      sum += d;
      sq += d * d;
      mn = lo < mn ? lo : mn;
      mx = hi > mx ? hi : mx;
      am = a > am ? a : am;
      fin += f ? 1u : 0u;
      nan += cls == 1u ? 1u : 0u;
      zero += (f && x == 0.0lf) ? 1u : 0u;
      if (f) atomicAdd(s_buckets[order_bucket(b)], 1u);
    }
    s_sum[lane] = sum, s_sq[lane] = sq, s_lo[lane] = mn, s_hi[lane] = mx, s_am[lane] = am;
    s_fin[lane] = fin, s_nan[lane] = nan, s_zero[lane] = zero;
    barrier();
    if (lane == 0u) {
      // The segment's statistics (widened_tiles.cpp's segment_stats).
      precise double s = 0.0lf, q = 0.0lf;
      double b_min = inf(), b_max = -inf(), b_am = 0.0lf;
      uint finite = 0u, b_nan = 0u, b_zero = 0u;
      for (uint l = 0u; l < LANES; ++l) {
        s += s_sum[l];
        q += s_sq[l];
        b_min = s_lo[l] < b_min ? s_lo[l] : b_min;
        b_max = b_max < s_hi[l] ? s_hi[l] : b_max;
        b_am = b_am < s_am[l] ? s_am[l] : b_am;
        finite += s_fin[l], b_nan += s_nan[l], b_zero += s_zero[l];
      }
      precise double b_sum = 0.0lf, b_m2 = 0.0lf;
      if (finite > 0u) {
        precise const double nf = double(finite);
        b_sum = s + c * nf;
        precise const double m2 = q - s * s / nf;
        b_m2 = 0.0lf < m2 ? m2 : 0.0lf;
      }
      // Merged into the tile (widened_tiles.cpp's merge).
      precise const double na = double(count - nans - infs), nb = double(finite);
      if (nb > 0.0lf) {
        if (na == 0.0lf) {
          t_m2 = b_m2;
        } else {
          precise const double delta = b_sum / nb - t_sum / na;
          t_m2 = t_m2 + b_m2 + delta * delta * (na * nb / (na + nb));
        }
        t_sum += b_sum;
        t_min = b_min < t_min ? b_min : t_min;
        t_max = t_max < b_max ? b_max : t_max;
        t_am = t_am < b_am ? b_am : t_am;
      }
      count += uint64_t(w);
      nans += uint64_t(b_nan);
      infs += uint64_t(w - finite - b_nan);
      zeros += uint64_t(b_zero);
    }
    barrier();
  }
  if (lane == 0u) {
    tiles[tile].count = count, tiles[tile].nan_count = nans, tiles[tile].inf_count = infs, tiles[tile].zero_count = zeros;
    tiles[tile].min_v = t_min, tiles[tile].max_v = t_max, tiles[tile].abs_max = t_am;
    tiles[tile].sum = t_sum, tiles[tile].m2 = t_m2;
  }
  write_buckets(tile, lane);
}

shared uint s_count[256];

// Sums of count x d and count x d^2 (d = value - shift) over the finite patterns, in pattern order.
void pattern_sums(double shift, out double sum_out, out double sq_out) {
  precise double sum = 0.0lf, sq = 0.0lf;
  for (uint p = 0u; p < 256u; ++p) {
    const uint c = s_count[p];
    if (c == 0u) continue;
    uint cls;
    const double v = pattern_value(p, cls);
    if (cls != 0u) continue;
    precise const double d = v - shift;
    precise const double cd = double(c) * d;
    sum += cd;
    sq += cd * d;
  }
  sum_out = sum, sq_out = sq;
}

void patterns(uint tile, uint c0, uint w, uint lane) {
  for (uint k = lane; k < 256u; k += LANES) s_count[k] = 0u;
  barrier();
  for (uint r = 0u; r < pc.rows; ++r)
    for (uint i = lane; i < w; i += LANES) atomicAdd(s_count[load_bits(r * pc.cols + c0 + i)], 1u);
  barrier();
  for (uint k = lane; k < 256u; k += LANES)
    if (s_count[k] != 0u) atomicAdd(totals[k], s_count[k]);
  if (lane == 0u) {
    // The shift: the first finite value of the tile's first row (0 when it has none).
    const uint first = first_finite(c0, w);
    uint first_cls;
    const double shift = first < w ? pattern_value(load_bits(c0 + first), first_cls) : 0.0lf;
    uint64_t nans = 0ul, infs = 0ul, zeros = 0ul;
    precise double am = 0.0lf;
    uint min_key = 256u, max_key = 0u, min_p = 0u, max_p = 0u;
    for (uint p = 0u; p < 256u; ++p) {
      const uint c = s_count[p];
      if (c == 0u) continue;
      uint cls;
      const double v = pattern_value(p, cls);
      if (cls == 1u) { nans += uint64_t(c); continue; }
      if (cls == 2u) { infs += uint64_t(c); continue; }
      if (v == 0.0lf) zeros += uint64_t(c);
      const uint key = order_bucket(p);
      s_buckets[key] += c;
      if (key < min_key) min_key = key, min_p = p;
      if (key >= max_key) max_key = key, max_p = p;
      am = am < abs(v) ? abs(v) : am;
    }
    const uint64_t count = uint64_t(pc.rows) * uint64_t(w);
    const uint64_t finite = count - nans - infs;
    tiles[tile].count = count, tiles[tile].nan_count = nans, tiles[tile].inf_count = infs, tiles[tile].zero_count = zeros;
    tiles[tile].min_v = inf(), tiles[tile].max_v = -inf(), tiles[tile].abs_max = am, tiles[tile].sum = 0.0lf;
    tiles[tile].m2 = 0.0lf;
    if (finite > 0ul) {
      precise const double n = double(finite);
      double sum, sq;
      pattern_sums(shift, sum, sq);
      precise double m2 = sq - sum * sum / n;
      // Cancellation took more than 10 bits of the sum of squares: summed again about the mean.
      if (sq - sum * sum / n < sq / 1024.0lf) {
        precise const double mean = shift + sum / n;
        double s2, q2;
        pattern_sums(mean, s2, q2);
        m2 = q2 - s2 * s2 / n;
      }
      uint cls;
      tiles[tile].sum = sum + n * shift;
      tiles[tile].m2 = 0.0lf < m2 ? m2 : 0.0lf;
      tiles[tile].min_v = pattern_value(min_p, cls);
      tiles[tile].max_v = pattern_value(max_p, cls);
    }
  }
  barrier();
  write_buckets(tile, lane);
}

void main() {
  const uint lane = gl_LocalInvocationID.x;
  const uint tile = gl_WorkGroupID.x;
  const uint c0 = tile * pc.tile_cols;
  const uint w = min(pc.cols, c0 + pc.tile_cols) - c0;
  for (uint k = lane; k < 256u; k += LANES) s_buckets[k] = 0u;
  barrier();
  if (METHOD == 0u) patterns(tile, c0, w, lane);
  else widened(tile, c0, w, lane);
}
