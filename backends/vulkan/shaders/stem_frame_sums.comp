#version 450
// TM_OP_STEM_FRAME_SUMS (op_contracts.h): exact uint64 sums over 4D-STEM frames, the same integers as the
// CPU reference (integer sums do not depend on their order). One workgroup per frame; each invocation
// adds a strided share of the frame's pixels (or of a pixel list's runs) and the workgroup reduces in
// shared memory.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 64) in;
layout(constant_id = 0) const uint DTYPE = 12u;
layout(constant_id = 1) const uint WIDTH = 2u;

layout(std430, binding = 0) readonly buffer Input { uint words[]; };
layout(std430, binding = 1) writeonly buffer Output { uint64_t sums[]; };
// runs[0 .. list_count]: each list's first run; then (first pixel, count) pairs from index list_count + 1.
layout(std430, binding = 2) readonly buffer Runs { uint runs[]; };

layout(push_constant) uniform Push {
  uint pixels;       // pixels per frame
  uint cols;         // pixels per row
  uint list_count;
  uint com_list;     // a list index, or 0xFFFFFFFF: every pixel
  uint lists_only;   // 1: only the lists (TM_STEM_LISTS_ONLY)
  uint first_frame;  // frame of this chunk that workgroup 0 computes
} pc;

#include "elements.glsl"

const uint N = 64u;
shared uint64_t s_sum[N];

// The workgroup's total of v (every invocation passes its share; all receive the result).
uint64_t reduce(uint64_t v) {
  const uint t = gl_LocalInvocationID.x;
  barrier();
  s_sum[t] = v;
  barrier();
  for (uint w = N / 2u; w > 0u; w /= 2u) {
    if (t < w) s_sum[t] += s_sum[t + w];
    barrier();
  }
  return s_sum[0];
}

uint run_first(uint r) { return runs[pc.list_count + 1u + 2u * r]; }
uint run_count(uint r) { return runs[pc.list_count + 2u + 2u * r]; }

void main() {
  const uint t = gl_LocalInvocationID.x;
  const uint frame = pc.first_frame + gl_WorkGroupID.x;
  const uint base = frame * pc.pixels;
  const uint row_values = 4u + pc.list_count;
  const uint out_base = frame * row_values;

  uint64_t total = 0ul, w = 0ul, sr = 0ul, sc = 0ul;
  if (pc.lists_only == 0u) {
    for (uint i = t; i < pc.pixels; i += N) {
      const uint64_t v = uint64_t(load_bits(base + i));
      total += v;
      sr += uint64_t(i / pc.cols) * v;
      sc += uint64_t(i % pc.cols) * v;
    }
    if (pc.com_list != 0xFFFFFFFFu) {
      sr = 0ul, sc = 0ul;
      for (uint r = runs[pc.com_list] + t; r < runs[pc.com_list + 1u]; r += N) {
        const uint first = run_first(r), row = first / pc.cols, col0 = first % pc.cols;
        for (uint k = 0u; k < run_count(r); ++k) {
          const uint64_t v = uint64_t(load_bits(base + first + k));
          w += v, sr += uint64_t(row) * v, sc += uint64_t(col0 + k) * v;
        }
      }
    }
  }
  const uint64_t s_total = reduce(total);
  const uint64_t s_w = pc.com_list == 0xFFFFFFFFu ? s_total : reduce(w);
  const uint64_t s_r = reduce(sr), s_c = reduce(sc);
  if (t == 0u) {
    sums[out_base] = s_total;
    sums[out_base + 1u] = s_w;
    sums[out_base + 2u] = s_r;
    sums[out_base + 3u] = s_c;
  }
  for (uint j = 0u; j < pc.list_count; ++j) {
    uint64_t s = 0ul;
    for (uint r = runs[j] + t; r < runs[j + 1u]; r += N) {
      const uint first = run_first(r);
      for (uint k = 0u; k < run_count(r); ++k) s += uint64_t(load_bits(base + first + k));
    }
    const uint64_t s_j = reduce(s);
    if (t == 0u) sums[out_base + 4u + j] = s_j;
  }
}
