#version 450
// stem.ssb_overlap, pass 2 of 3: the inverse DFT along each row of every corrected plane,
// T_b(i, jo) = Σ_j C_b(i, j)·e^{+2πi j·jo/C} (unnormalised; complex64, a direct sum with exact twiddle indices).
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Planes { vec2 planes[]; };
layout(std430, binding = 1) writeonly buffer Rows { vec2 rows_out[]; };
layout(std430, binding = 2) readonly buffer Floats { vec2 f[]; };

#include "ssb_common.glsl"

void main() {
  const uint N = n_positions(), C = pc.cols;
  for (uint idx = gl_GlobalInvocationID.x; idx < pc.nb * N; idx += pc.groups * 64u) {
    const uint row_start = idx - idx % C, jo = idx % C;
    vec2 acc = vec2(0.0);
    uint m = 0u;  // j·jo mod C, stepped
    for (uint j = 0u; j < C; ++j) {
      acc += cmul(planes[row_start + j], f[f_tw_cols(m)]);
      m += jo;
      if (m >= C) m -= C;
    }
    rows_out[idx] = acc;
  }
}
