#version 450
// stem.ssb_overlap, pass 1 of 3 (quadratic variant, op_contracts.h): the corrected spectrum C_b(q) of each
// pixel of the batch, full plane, complex64. Aperture tests in float64 as the CPU reference.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Spectra { vec2 g[]; };        // nb half planes, `stride` apart
layout(std430, binding = 1) writeonly buffer Planes { vec2 planes[]; };   // nb × R × C
// Aux float64 section D: kmax2, 0, then ν (row, col) per scan frequency [N], then per pixel of the batch
// (k_row, k_col, dc, inside) [nb].
layout(std430, binding = 2) readonly buffer Doubles { double d[]; };
layout(std430, binding = 3) readonly buffer Floats { vec2 f[]; };

#include "ssb_common.glsl"

void main() {
  const uint N = n_positions(), half_cols = pc.cols / 2u + 1u;
  const double kmax2 = d[0];
  for (uint idx = gl_GlobalInvocationID.x; idx < pc.nb * N; idx += pc.groups * 64u) {
    const uint b = idx / N, q = idx % N, i = q / pc.cols, j = q % pc.cols;
    const uint pix = 2u + 2u * N + 4u * b;
    const double kr = d[pix], kc = d[pix + 1u];
    vec2 cv = vec2(0.0);
    if (q == 0u) {
      cv = vec2(float(d[pix + 2u]), 0.0);  // the DC term (Γ := 1)
    } else if (d[pix + 3u] != 0.0) {
      const double vr = d[2u + 2u * q], vc = d[3u + 2u * q];
      const double mr = kr - vr, mc = kc - vc, pr = kr + vr, pcol = kc + vc;
      const bool minus = mr * mr + mc * mc <= kmax2, plus = pr * pr + pcol * pcol <= kmax2;
      if (minus || plus) {
        vec2 gv;
        if (j < half_cols) {
          gv = g[b * pc.stride + i * half_cols + j];
        } else {  // G(−ν) = conj G(ν)
          gv = g[b * pc.stride + ((pc.rows - i) % pc.rows) * half_cols + (pc.cols - j)];
          gv.y = -gv.y;
        }
        const vec2 e = f[f_echi(q)];
        vec2 w;
        if (minus && plus) {
          const float two_sin = 2.0 * e.y;
          w = vec2(0.0, two_sin / max(abs(two_sin), 1e-8));
        } else {
          w = minus ? e : vec2(-e.x, e.y);  // e, or −conj(e)
        }
        cv = cmul(cmul(gv, cmul(f[f_row_factor(b, i)], f[f_col_factor(b, j)])), w);
      }
    }
    planes[idx] = cv;
  }
}
