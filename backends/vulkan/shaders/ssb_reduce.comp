#version 450
// stem.ssb_overlap, pass 3 of 3: the inverse DFT along the columns, O_b(io, jo) = Σ_i T_b(i, jo)·e^{+2πi i·io/R}
// / (R·C), and the reduction over the batch's pixels in pixel order into float64 sums per position
// (Σ Re O_b, Σ Im O_b, Σ arg O_b, Σ (arg O_b)²), added to what earlier batches left.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 64) in;

layout(std430, binding = 0) readonly buffer Rows { vec2 rows_in[]; };
layout(std430, binding = 1) buffer Sums { dvec4 sums[]; };
layout(std430, binding = 2) readonly buffer Floats { vec2 f[]; };

#include "ssb_common.glsl"

// atan2 in float64 from arithmetic alone (GLSL has no float64 atan): src/support/fast_atan2.h, the same
// reduction and series, within 1e-10 rad of the correctly rounded value.
double atan2_f64(double y, double x) {
  const double ax = abs(x), ay = abs(y);
  const double hi = max(ax, ay), lo = min(ax, ay);
  const double t = hi > 0.0 ? lo / hi : 0.0;
  const bool reduce = t > 0.41421356237309503LF;
  const double r = reduce ? (t - 1.0) / (t + 1.0) : t, r2 = r * r;
  double p = 1.0LF / 21.0;
  p = p * r2 - 1.0LF / 19.0;
  p = p * r2 + 1.0LF / 17.0;
  p = p * r2 - 1.0LF / 15.0;
  p = p * r2 + 1.0LF / 13.0;
  p = p * r2 - 1.0LF / 11.0;
  p = p * r2 + 1.0LF / 9.0;
  p = p * r2 - 1.0LF / 7.0;
  p = p * r2 + 1.0LF / 5.0;
  p = p * r2 - 1.0LF / 3.0;
  p = p * r2 + 1.0LF;
  const double pi = 3.14159265358979311600LF;
  double a = (reduce ? pi / 4.0 : 0.0LF) + r * p;
  if (ay > ax) a = pi / 2.0 - a;
  if (x < 0.0) a = pi - a;
  return y < 0.0 ? -a : a;
}

void main() {
  const uint N = n_positions(), C = pc.cols;
  const double inv_n = 1.0LF / double(N);
  for (uint q = gl_GlobalInvocationID.x; q < N; q += pc.groups * 64u) {
    const uint io = q / C, jo = q % C;
    dvec4 s = sums[q];
    for (uint b = 0u; b < pc.nb; ++b) {
      vec2 acc = vec2(0.0);
      uint m = 0u;  // i·io mod R, stepped
      for (uint i = 0u; i < pc.rows; ++i) {
        acc += cmul(rows_in[b * N + i * C + jo], f[f_tw_rows(m)]);
        m += io;
        if (m >= pc.rows) m -= pc.rows;
      }
      const double re = double(acc.x) * inv_n, im = double(acc.y) * inv_n;
      const double a = atan2_f64(im, re);
      s += dvec4(re, im, a, a * a);
    }
    sums[q] = s;
  }
}
