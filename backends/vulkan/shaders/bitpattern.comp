#version 450
// TM_OP_STATS_BITPATTERN_HISTOGRAM (op_contracts.h): the count of every bit pattern of an 8- or 16-bit
// dtype, exact. 32-bit counts per chunk (fewer than 2^31 elements), added by the host into its 64-bit
// totals. 8-bit patterns are counted in shared memory per workgroup first.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint DTYPE = 11u;
layout(constant_id = 1) const uint WIDTH = 1u;

layout(std430, binding = 0) readonly buffer Input { uint words[]; };
layout(std430, binding = 1) buffer Counts { uint counts[]; };  // 256 or 65536, zeroed by the host

layout(push_constant) uniform Push { uint elements; } pc;

#include "elements.glsl"

shared uint s_counts[256];

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (WIDTH == 1u) {
    s_counts[gl_LocalInvocationID.x] = 0u;
    barrier();
    for (uint i = gl_GlobalInvocationID.x; i < pc.elements; i += stride) atomicAdd(s_counts[load_bits(i)], 1u);
    barrier();
    const uint c = s_counts[gl_LocalInvocationID.x];
    if (c != 0u) atomicAdd(counts[gl_LocalInvocationID.x], c);
  } else {
    for (uint i = gl_GlobalInvocationID.x; i < pc.elements; i += stride) atomicAdd(counts[load_bits(i)], 1u);
  }
}
