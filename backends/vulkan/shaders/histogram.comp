#version 450
// TM_OP_STATS_HISTOGRAM (op_contracts.h): counts over caller-given edges, exact. A finite value x goes
// to bin i with edges[i] <= x < edges[i+1] (the last bin also takes x == edges[bins]), to slot `bins`
// when below edges[0], to `bins + 1` when above edges[bins]; the comparisons are in double, where every
// value of the input dtypes is exact. Counts are 32-bit per chunk (a chunk holds fewer than 2^31
// elements); the host adds them into its 64-bit totals. With few bins each workgroup counts in shared
// memory first (PRIVATE = 1).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DTYPE = 2u;
layout(constant_id = 1) const uint WIDTH = 4u;
layout(constant_id = 2) const uint PRIVATE = 1u;
const uint MAX_PRIVATE_SLOTS = 4096u;

layout(std430, binding = 0) readonly buffer Input { uint words[]; };
layout(std430, binding = 1) buffer Counts { uint counts[]; };   // bins + 2, zeroed by the host
layout(std430, binding = 2) readonly buffer Edges { double edges[]; };  // bins + 1

layout(push_constant) uniform Push {
  uint elements;
  uint bins;
} pc;

#include "elements.glsl"

shared uint s_counts[PRIVATE == 1u ? MAX_PRIVATE_SLOTS : 1u];

uint slot_of(double x) {
  const uint bins = pc.bins;
  if (x < edges[0]) return bins;
  if (x > edges[bins]) return bins + 1u;
  if (x == edges[bins]) return bins - 1u;
  // upper_bound over edges[0..bins]: the first edge greater than x, minus one.
  uint lo = 0u, hi = bins + 1u;
  while (lo < hi) {
    const uint mid = (lo + hi) / 2u;
    if (edges[mid] <= x) lo = mid + 1u; else hi = mid;
  }
  return lo - 1u;
}

void main() {
  const uint slots = pc.bins + 2u;
  if (PRIVATE == 1u) {
    for (uint s = gl_LocalInvocationID.x; s < slots; s += gl_WorkGroupSize.x) s_counts[s] = 0u;
    barrier();
  }
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < pc.elements; i += stride) {
    uint cls;
    const double x = load_value(i, cls);
    if (cls != 0u) continue;
    const uint s = slot_of(x);
    if (PRIVATE == 1u) atomicAdd(s_counts[s], 1u);
    else atomicAdd(counts[s], 1u);
  }
  if (PRIVATE == 1u) {
    barrier();
    for (uint s = gl_LocalInvocationID.x; s < slots; s += gl_WorkGroupSize.x)
      if (s_counts[s] != 0u) atomicAdd(counts[s], s_counts[s]);
  }
}
