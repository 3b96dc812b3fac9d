#version 450
// Exact quantiles of 32-bit dtypes (TM_OP_STATS_QUANTILES), counting side. Each finite element gets an
// order key, an unsigned integer whose order is the values' order (for floats -0 just below +0):
//   f32: negative values all bits flipped, the others the sign bit set; i32: sign bit flipped; u32: as is.
// PASS 0 counts the top 16 bits of every key: counts[key >> 16].
// PASS 1 counts, for the keys whose top 16 bits are one of pc.targets sorted prefixes (targets[]),
//   the low 16 bits: counts[t * 65536 + (key & 0xFFFF)] for target index t.
// The host finds each wanted rank's bucket from pass 0, then its exact key from pass 1. 32-bit counts
// per chunk (fewer than 2^31 elements), added by the host into 64-bit totals.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DTYPE = 2u;
layout(constant_id = 1) const uint WIDTH = 4u;
layout(constant_id = 2) const uint PASS = 0u;

layout(std430, binding = 0) readonly buffer Input { uint words[]; };
layout(std430, binding = 1) buffer Counts { uint counts[]; };
layout(std430, binding = 2) readonly buffer Targets { uint targets[]; };

layout(push_constant) uniform Push {
  uint elements;
  uint target_count;
} pc;

#include "elements.glsl"

// The order key of a finite element, or false when the element is NaN or ±Inf.
bool order_key(uint i, out uint key) {
  const uint b = load_bits(i);
  if (DTYPE == DT_F32) {
    key = (b & 0x80000000u) != 0u ? ~b : (b | 0x80000000u);
    return float_class(DTYPE, b) == 0u;
  }
  key = DTYPE == DT_I32 ? (b ^ 0x80000000u) : b;
  return true;
}

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < pc.elements; i += stride) {
    uint key;
    if (!order_key(i, key)) continue;
    if (PASS == 0u) {
      atomicAdd(counts[key >> 16], 1u);
      continue;
    }
    const uint top = key >> 16;
    uint lo = 0u, hi = pc.target_count;
    while (lo < hi) {
      const uint mid = (lo + hi) / 2u;
      if (targets[mid] < top) lo = mid + 1u; else hi = mid;
    }
    if (lo < pc.target_count && targets[lo] == top) atomicAdd(counts[lo * 65536u + (key & 0xFFFFu)], 1u);
  }
}
