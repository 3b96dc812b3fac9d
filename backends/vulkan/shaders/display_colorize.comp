#version 450
// TM_OP_DISPLAY_COLORIZE (op_contracts.h): colours and the 256-bin display histogram of float64 values,
// byte-identical to the CPU reference. The host hands over 255 thresholds in data space (built from the
// reference Normalizer, src/display/thresholds.h), so a colour index is k = the number of thresholds <=
// key (a branch-free binary search), key = x or |x|. NaN: the invalid colour, counted apart; key +Inf ->
// 255, key -Inf -> 0.
//
// The comparisons are float64 comparisons done on ordinals: the host turns each threshold into the
// position of its bit pattern in float64 order (-0 and +0 both 0) and the shader does the same to every
// value, so a < b as doubles exactly when ord(a) < ord(b). Integer compares cannot be changed by a
// driver's denormal flushing (lavapipe runs shaders with FTZ/DAZ on), which float compares could.
//
// Each workgroup counts in shared memory and adds its counts into 32-bit per-launch counters (a launch
// holds fewer than 2^31 values); the host adds those into its 64-bit totals.
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require

layout(local_size_x = 256) in;

layout(std430, binding = 0) readonly buffer Input { uint64_t values[]; };  // float64 bit patterns
// words[0 .. 259): bins 0..255, nan, pos_inf, neg_inf (zeroed by the host); word 259 padding; then one
// RGBA word per value from word 260 on.
layout(std430, binding = 1) buffer Output { uint words[]; };
// The thresholds' ordinals (entry 255 unused), then the 256 table entries as little-endian RGBA words.
layout(std430, binding = 2) readonly buffer Params { int64_t thresholds[256]; uint table[256]; };

layout(push_constant) uniform Push {
  uint elements;
  uint key_mode;  // 0: key = x; 1: key = |x|
} pc;

const uint COUNTS = 259u;
const uint RGBA_BASE = 260u;
const uint64_t SIGN = 0x8000000000000000ul;
const uint64_t MAGNITUDE = 0x7FFFFFFFFFFFFFFFul;
const uint64_t INF_BITS = 0x7FF0000000000000ul;

shared int64_t s_thresholds[256];
shared uint s_table[256];
shared uint s_counts[COUNTS];

void main() {
  const uint t = gl_LocalInvocationID.x;
  s_thresholds[t] = thresholds[t];
  s_table[t] = table[t];
  for (uint s = t; s < COUNTS; s += gl_WorkGroupSize.x) s_counts[s] = 0u;
  barrier();

  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < pc.elements; i += stride) {
    const uint64_t bits = values[i];
    const uint64_t mag = bits & MAGNITUDE;
    uint word = 0u;
    if (mag > INF_BITS) {
      atomicAdd(s_counts[256u], 1u);  // NaN
    } else {
      const bool negative = (bits & SIGN) != 0ul;
      const int64_t key = (pc.key_mode == 1u || !negative) ? int64_t(mag) : -int64_t(mag);
      uint k;
      if (mag == INF_BITS) {
        k = key > 0l ? 255u : 0u;
      } else {
        k = 0u;
        for (uint step = 128u; step > 0u; step >>= 1u) k += s_thresholds[k + step - 1u] <= key ? step : 0u;
      }
      word = s_table[k];
      const uint slot = mag == INF_BITS ? (negative ? 258u : 257u) : k;
      atomicAdd(s_counts[slot], 1u);
    }
    words[RGBA_BASE + i] = word;
  }
  barrier();
  for (uint s = t; s < COUNTS; s += gl_WorkGroupSize.x)
    if (s_counts[s] != 0u) atomicAdd(words[s], s_counts[s]);
}
