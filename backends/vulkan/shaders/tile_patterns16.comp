#version 450
// TM_OP_LOD_TILE_STATS, method TM_TILE_PATTERNS (op_contracts.h) for the 16-bit floats bf16 and f16, bit-identical
// to the CPU's range scan (backends/cpu/pattern_tiles.cpp, finish_range_scan): one workgroup per tile of a band
// of pc.rows x pc.cols elements, tiles pc.tile_cols wide.
//  - The tile's elements are counted by bit pattern into its own 65,536 counts in Scratch (global atomics,
//    exact), with the extent the scan needs: order keys of the finite values (min, max), finite magnitudes
//    other than zero (low) and with zero (high), and the non-finite count.
//  - Every pattern's count is added to the launch's totals; zeros and non-finite patterns are counted apart.
//  - Sums about a shift (the first finite value of the tile's first row): the zeros' term first, then the
//    finite non-zero patterns in the magnitude range [low & ~31, (high | 31) + 1), positive then negative,
//    pattern p feeding float64 lane p % 32 (invocation l is lane l) with d = (p % 32) x ulp + (v0 - shift),
//    v0 the value of the pattern's group of 32 and ulp its spacing, then count x d and count x d x d added,
//    and the lanes reduced in lane order: the CPU's arithmetic, operation by operation (`precise`: no fused
//    multiply-add, no reassociation). When the sum of squares loses more than 10 bits to cancellation the sums
//    are taken again about the mean (the counts are still in Scratch).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 32) in;
layout(constant_id = 0) const uint DTYPE = 4u;
layout(constant_id = 1) const uint WIDTH = 2u;

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
  uint totals[65536];  // the launch's count of every pattern (zeroed by the host first)
  Tile tiles[];
};

// 65,536 counts per workgroup of the launch, only this shader touches them.
layout(std430, binding = 2) coherent buffer Scratch { uint counts[]; };

const uint LANES = 32u;

shared uint s_buckets[256];
shared uint s_key_min, s_key_max, s_mag_low, s_mag_high, s_non_finite, s_nan, s_inf;
shared double s_shift, s_sum[LANES], s_sq[LANES];
shared bool s_again;

uint exponent_mask() { return DTYPE == DT_F16 ? 0x7C00u : 0x7F80u; }

// Lane `lane`'s sums of count x d and count x d x d about `shift` over the finite non-zero patterns of
// magnitudes [begin, end), positive then negative (the CPU's ScanPatterns16, one float64 lane).
void lane_sums(uint base, uint lane, uint begin, uint end, double shift) {
  const uint mantissa = DTYPE == DT_F16 ? 10u : 7u;
  const int bias = DTYPE == DT_F16 ? 25 : 134;  // value = integer mantissa x 2^(e - bias)
  precise double sum = 0.0lf, sq = 0.0lf;
  for (uint sign = 0u; sign <= 0x8000u; sign += 0x8000u) {
    for (uint g = begin; g < end; g += LANES) {
      const uint c = counts[base + (g | sign) + lane];
      if (c == 0u) continue;  // adds +-0: the CPU's lanes do not change
      const uint e = g >> mantissa, m = g & ((1u << mantissa) - 1u);
      const double ulp_magnitude = uint64BitsToDouble(uint64_t(1023 + int(max(e, 1u)) - bias) << 52);
      const double ulp = sign != 0u ? -ulp_magnitude : ulp_magnitude;
      precise const double v0 = double((e != 0u ? 1u << mantissa : 0u) + m) * ulp;
      precise const double d = double(lane) * ulp + (v0 - shift);
      precise const double cd = double(int(c)) * d;
      sum += cd;
      sq += cd * d;
    }
  }
  s_sum[lane] = sum, s_sq[lane] = sq;
}

// The CPU's sums_about: the zeros' term, then the lanes reduced in order and added.
void reduce_sums(double shift, uint zeros, bool scan, out double sum, out double sq) {
  precise const double z = double(zeros);
  precise double s = z * (0.0lf - shift), q = z * shift * shift;
  if (scan) {
    precise double ls = 0.0lf, lq = 0.0lf;
    for (uint l = 0u; l < LANES; ++l) ls += s_sum[l];
    for (uint l = 0u; l < LANES; ++l) lq += s_sq[l];
    s += ls;
    q += lq;
  }
  sum = s, sq = q;
}

bool cancelled(double sum, double sq, double n) {
  precise const double lost = sq - sum * sum / n;
  precise const double limit = sq / 1024.0lf;
  return lost < limit;
}

double value16(uint p) {
  uint cls;
  return pattern_value(p, cls);
}

void main() {
  const uint lane = gl_LocalInvocationID.x;
  const uint tile = gl_WorkGroupID.x;
  const uint c0 = tile * pc.tile_cols;
  const uint w = min(pc.cols, c0 + pc.tile_cols) - c0;
  const uint base = tile * 65536u;
  const uint exp_mask = exponent_mask();
  for (uint k = lane; k < 256u; k += LANES) s_buckets[k] = 0u;
  for (uint p = lane; p < 65536u; p += LANES) counts[base + p] = 0u;
  if (lane == 0u) {
    s_key_min = 0xFFFFu, s_key_max = 0u, s_mag_low = 0xFFFFu, s_mag_high = 0u, s_non_finite = 0u;
    s_nan = 0u, s_inf = 0u;
    // The shift: the tile's first finite value of its first row (0 when that row has none).
    s_shift = 0.0lf;
    const uint first = first_finite(c0, w);
    if (first < w) s_shift = value16(load_bits(c0 + first));
  }
  memoryBarrierBuffer();
  barrier();

  // Count the patterns, and the extent of the finite ones.
  uint key_min = 0xFFFFu, key_max = 0u, mag_low = 0xFFFFu, mag_high = 0u, non_finite = 0u;
  for (uint r = 0u; r < pc.rows; ++r) {
    const uint first = r * pc.cols + c0;
    for (uint i = lane; i < w; i += LANES) {
      const uint x = load_bits(first + i);
      atomicAdd(counts[base + x], 1u);
      const uint mag = x & 0x7FFFu;
      if (mag >= exp_mask) {
        ++non_finite;
        continue;
      }
      const uint key = (x & 0x8000u) != 0u ? (~x & 0xFFFFu) : (x | 0x8000u);
      key_min = min(key_min, key), key_max = max(key_max, key);
      if (mag != 0u) mag_low = min(mag_low, mag);
      mag_high = max(mag_high, mag);
    }
  }
  atomicMin(s_key_min, key_min), atomicMax(s_key_max, key_max);
  atomicMin(s_mag_low, mag_low), atomicMax(s_mag_high, mag_high);
  atomicAdd(s_non_finite, non_finite);
  memoryBarrierBuffer();
  barrier();

  // Totals, the non-finite counts and the order buckets; zeros and non-finite patterns then leave the
  // counts, so the scan sees only finite non-zero values.
  for (uint p = lane; p < 65536u; p += LANES) {
    const uint c = counts[base + p];
    if (c == 0u) continue;
    atomicAdd(totals[p], c);
    const uint mag = p & 0x7FFFu;
    if (mag >= exp_mask) {
      if (mag == exp_mask) atomicAdd(s_inf, c);
      else atomicAdd(s_nan, c);
      counts[base + p] = 0u;
      continue;
    }
    atomicAdd(s_buckets[order_bucket(p)], c);
  }
  memoryBarrierBuffer();
  barrier();
  const uint zeros = counts[base] + counts[base + 0x8000u];
  const uint64_t count = uint64_t(pc.rows) * uint64_t(w);
  const uint64_t finite = count - uint64_t(s_nan) - uint64_t(s_inf);
  memoryBarrierBuffer();
  barrier();
  if (lane == 0u) counts[base] = 0u, counts[base + 0x8000u] = 0u;
  memoryBarrierBuffer();
  barrier();

  const bool scan = s_mag_low <= s_mag_high;  // a finite value other than zero
  const uint begin = s_mag_low & ~(LANES - 1u), end = (s_mag_high | (LANES - 1u)) + 1u;
  const double shift = s_shift;
  if (finite > 0ul && scan) lane_sums(base, lane, begin, end, shift);
  barrier();
  double sum = 0.0lf, sq = 0.0lf;
  if (lane == 0u) {
    s_again = false;
    if (finite > 0ul) {
      reduce_sums(shift, zeros, scan, sum, sq);
      s_again = cancelled(sum, sq, double(finite));
      if (s_again) {
        precise const double mean = shift + sum / double(finite);
        s_shift = mean;
      }
    }
  }
  barrier();
  const bool again = s_again;
  const double mean = s_shift;
  if (again && scan) lane_sums(base, lane, begin, end, mean);
  barrier();
  if (lane == 0u) {
    tiles[tile].count = count, tiles[tile].nan_count = uint64_t(s_nan), tiles[tile].inf_count = uint64_t(s_inf);
    tiles[tile].zero_count = uint64_t(zeros);
    tiles[tile].min_v = inf(), tiles[tile].max_v = -inf(), tiles[tile].abs_max = 0.0lf;
    tiles[tile].sum = 0.0lf, tiles[tile].m2 = 0.0lf;
    if (finite > 0ul) {
      precise const double n = double(finite);
      precise double m2 = sq - sum * sum / n;
      if (again) {
        double s2, q2;
        reduce_sums(mean, zeros, scan, s2, q2);
        m2 = q2 - s2 * s2 / n;
      }
      precise const double total = sum + n * shift;
      tiles[tile].sum = total;
      tiles[tile].m2 = 0.0lf < m2 ? m2 : 0.0lf;
      const uint kmin = s_key_min, kmax = s_key_max;
      tiles[tile].min_v = value16((kmin & 0x8000u) != 0u ? kmin ^ 0x8000u : ~kmin & 0xFFFFu);
      tiles[tile].max_v = value16((kmax & 0x8000u) != 0u ? kmax ^ 0x8000u : ~kmax & 0xFFFFu);
      tiles[tile].abs_max = value16(s_mag_high);
    }
  }
  barrier();
  for (uint k = lane; k < 256u; k += LANES) tiles[tile].buckets[k] = s_buckets[k];
}
