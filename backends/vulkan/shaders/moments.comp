#version 450
// TM_OP_STATS_MOMENTS (op_contracts.h), bit-identical to the CPU reference: one workgroup per canonical
// block of 65,536 elements, one invocation per virtual lane. Invocation l adds elements l, l+16, l+32,
// ... in order into its double accumulators (the contract's lane l), and invocation 0 reduces the 16
// lanes pairwise, exactly as backends/cpu/block_contract.h does. Accumulators are `precise`: no fused
// multiply-add, no reassociation.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 16) in;
layout(constant_id = 0) const uint DTYPE = 2u;
layout(constant_id = 1) const uint WIDTH = 4u;

layout(std430, binding = 0) readonly buffer Input { uint words[]; };

struct Partial {  // tm_moments_partial_v1: eighteen 8-byte fields, no padding
  uint64_t count, finite_count, nan_count, inf_count, zero_count;
  double min_v, max_v, abs_max, sum, sum_err, mean, m2;
  int64_t int_min, int_max;
  uint64_t uint_min, uint_max, int_sum_lo;
  int64_t int_sum_hi;
};
layout(std430, binding = 1) writeonly buffer Output { Partial partials[]; };

layout(push_constant) uniform Push {
  uint elements;     // elements in this chunk (the chunk starts at a canonical block boundary)
  uint first_block;  // block of the chunk this dispatch's workgroup 0 computes
} pc;

#include "elements.glsl"

const uint BLOCK = 65536u;
const uint LANES = 16u;

shared double s_a[LANES], s_b[LANES], s_lo[LANES], s_hi[LANES], s_amax[LANES];
shared uint s_nan[LANES], s_finite[LANES], s_zero[LANES];
shared int64_t s_isum[LANES], s_imin[LANES], s_imax[LANES];
shared double s_mean;
shared bool s_second_pass;

// The pairwise reduction of block_contract.h: (0+1), (2+3), ... then again, until one is left.
double reduce_lanes(bool second) {
  precise double l[LANES];
  for (uint i = 0u; i < LANES; ++i) l[i] = second ? s_b[i] : s_a[i];
  for (uint w = LANES; w > 1u; w /= 2u)
    for (uint i = 0u; i < w / 2u; ++i) l[i] = l[2u * i] + l[2u * i + 1u];
  return l[0];
}

double inf() { return uint64BitsToDouble(0x7FF0000000000000ul); }

// Second pass: sum over finite x of (x - mean)^2 in lane order, left in s_a.
void deviation_pass(uint start, uint n, uint lane, double mean) {
  precise double m2 = 0.0lf;
  for (uint i = lane; i < n; i += LANES) {
    uint cls;
    const double x = load_value(start + i, cls);
    if (cls != 0u) continue;
    const double d = x - mean;
    m2 += d * d;
  }
  s_a[lane] = m2;
}

void float_block(uint block, uint start, uint n, uint lane) {
  precise double sum = 0.0lf, sq = 0.0lf;
  double lo = inf(), hi = -inf(), amax = 0.0lf;
  uint nan = 0u, finite = 0u, zero = 0u;
  for (uint i = lane; i < n; i += LANES) {
    uint cls;
    const double x = load_value(start + i, cls);
    if (cls == 1u) { ++nan; continue; }
    if (cls == 2u) continue;
    if (x == 0.0lf) ++zero;
    ++finite;
    sum += x;
    sq += x * x;  // exact: squares of these dtypes fit a double
    lo = min(lo, x), hi = max(hi, x), amax = max(amax, abs(x));
  }
  s_a[lane] = sum, s_b[lane] = sq, s_lo[lane] = lo, s_hi[lane] = hi, s_amax[lane] = amax;
  s_nan[lane] = nan, s_finite[lane] = finite, s_zero[lane] = zero;
  barrier();
  if (lane == 0u) {
    uint64_t nans = 0ul, fin = 0ul, zeros = 0ul;
    double mn = inf(), mx = -inf(), am = 0.0lf;
    for (uint i = 0u; i < LANES; ++i) {
      nans += s_nan[i], fin += s_finite[i], zeros += s_zero[i];
      mn = min(mn, s_lo[i]), mx = max(mx, s_hi[i]), am = max(am, s_amax[i]);
    }
    precise double total = reduce_lanes(false);
    precise double total_sq = reduce_lanes(true);
    precise double mean = fin > 0ul ? total / double(fin) : 0.0lf;
    precise double s_mean_product = total * mean;
    Partial p;
    p.count = n, p.finite_count = fin, p.nan_count = nans, p.inf_count = n - fin - nans, p.zero_count = zeros;
    p.min_v = fin > 0ul ? mn : inf(), p.max_v = fin > 0ul ? mx : -inf(), p.abs_max = fin > 0ul ? am : 0.0lf;
    p.sum = total, p.sum_err = 0.0lf, p.mean = mean, p.m2 = 0.0lf;
    p.int_min = 0x7FFFFFFFFFFFFFFFl, p.int_max = -0x7FFFFFFFFFFFFFFFl - 1l;
    p.uint_min = 0xFFFFFFFFFFFFFFFFul, p.uint_max = 0ul, p.int_sum_lo = 0ul, p.int_sum_hi = 0l;
    // Single-pass m2 when the product keeps at least half of sumsq (block_contract.h single_pass_m2).
    const bool single = s_mean_product <= total_sq / 2.0lf;
    if (single) p.m2 = total_sq - s_mean_product;
    partials[block] = p;
    s_mean = mean;
    s_second_pass = !single;
  }
  barrier();
  if (!s_second_pass) return;
  deviation_pass(start, n, lane, s_mean);
  barrier();
  if (lane == 0u) partials[block].m2 = reduce_lanes(false);
}

void int_block(uint block, uint start, uint n, uint lane) {
  int64_t sum = 0l, lo = 0x7FFFFFFFFFFFFFFFl, hi = -0x7FFFFFFFFFFFFFFFl - 1l;
  uint zero = 0u;
  for (uint i = lane; i < n; i += LANES) {
    const int64_t x = int_value(DTYPE, load_bits(start + i));
    sum += x;
    lo = min(lo, x), hi = max(hi, x);
    if (x == 0l) ++zero;
  }
  s_isum[lane] = sum, s_imin[lane] = lo, s_imax[lane] = hi, s_zero[lane] = zero;
  barrier();
  if (lane == 0u) {
    int64_t total = 0l, mn = 0x7FFFFFFFFFFFFFFFl, mx = -0x7FFFFFFFFFFFFFFFl - 1l;
    uint64_t zeros = 0ul;
    for (uint i = 0u; i < LANES; ++i) total += s_isum[i], mn = min(mn, s_imin[i]), mx = max(mx, s_imax[i]), zeros += s_zero[i];
    // |total| < 2^53 for every dtype here (at most 65,536 values of 32 bits): exact in double, and one
    // division rounds the exact mean once, as the CPU reference does.
    precise double mean = double(total) / double(n);
    Partial p;
    p.count = n, p.finite_count = n, p.nan_count = 0ul, p.inf_count = 0ul, p.zero_count = zeros;
    p.min_v = double(mn), p.max_v = double(mx), p.abs_max = max(abs(double(mn)), abs(double(mx)));
    p.sum = double(total), p.sum_err = 0.0lf, p.mean = mean, p.m2 = 0.0lf;
    const bool is_signed = DTYPE == DT_I8 || DTYPE == DT_I16 || DTYPE == DT_I32;
    p.int_min = is_signed ? mn : 0x7FFFFFFFFFFFFFFFl, p.int_max = is_signed ? mx : -0x7FFFFFFFFFFFFFFFl - 1l;
    p.uint_min = is_signed ? 0xFFFFFFFFFFFFFFFFul : uint64_t(mn), p.uint_max = is_signed ? 0ul : uint64_t(mx);
    p.int_sum_lo = uint64_t(total), p.int_sum_hi = total < 0l ? -1l : 0l;
    partials[block] = p;
    s_mean = mean;
  }
  barrier();
  deviation_pass(start, n, lane, s_mean);
  barrier();
  if (lane == 0u) partials[block].m2 = reduce_lanes(false);
}

void main() {
  const uint lane = gl_LocalInvocationID.x;
  const uint block = pc.first_block + gl_WorkGroupID.x;
  const uint start = block * BLOCK;
  const uint n = min(BLOCK, pc.elements - start);
  if (dtype_is_float(DTYPE)) float_block(block, start, n, lane);
  else int_block(block, start, n, lane);
}
