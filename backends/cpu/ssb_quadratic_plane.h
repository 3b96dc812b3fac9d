// The first step of TM_OP_STEM_SSB_OVERLAP's quadratic variant on the CPU, per bright-field pixel b inside the
// aperture: the corrected spectrum C_b(q) = G_b(ν_q)·row_factor[i]·col_factor[j]·w(q) for every scan frequency
// q = i·cols + j (op_contracts.h), as complex64 (interleaved re, im) ready for the inverse transform; 0 where
// neither k_b − ν_q nor k_b + ν_q is inside the aperture. Vectorised with Highway (dynamic dispatch); every lane
// does quadratic_value's operations in its order, without fused multiply-adds, so the plane is bit-identical
// to the scalar loop on every target.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tmorph::cpu {

struct QuadraticPlane {
  uint64_t rows = 0, cols = 0;          // the scan's frequencies
  const float* g_half = nullptr;        // G_b, rows x (cols / 2 + 1) complex64: the real transform's half
  const double* nu = nullptr;           // rows x cols x 2: ν per frequency (row, col), 1/Å
  const double* e_chi = nullptr;        // rows x cols x 2: e^{iχ(ν)}
  const double* row_factor = nullptr;   // rows x 2: pixel b's row factors
  const double* col_factor = nullptr;   // cols x 2: pixel b's column factors
  double kr = 0, kc = 0;                // k_b (row, col), 1/Å
  double kmax2 = 0;                     // the aperture's radius², 1/Å²
};

// One frequency (i, j) of the plane: the contract's formula, the scalar reference of the vector lanes.
inline void quadratic_value(const QuadraticPlane& a, uint64_t i, uint64_t j, float* out) {
  const uint64_t q = i * a.cols + j, half = a.cols / 2 + 1;
  const double mr = a.kr - a.nu[2 * q], mc = a.kc - a.nu[2 * q + 1], pr = a.kr + a.nu[2 * q], pc = a.kc + a.nu[2 * q + 1];
  const bool minus = mr * mr + mc * mc <= a.kmax2, plus = pr * pr + pc * pc <= a.kmax2;
  if (!minus && !plus) {
    out[0] = out[1] = 0;
    return;
  }
  double g_re, g_im;
  if (j < half) {
    g_re = a.g_half[2 * (i * half + j)], g_im = a.g_half[2 * (i * half + j) + 1];
  } else {  // G(−ν) = conj G(ν)
    const uint64_t at = ((a.rows - i) % a.rows) * half + (a.cols - j);
    g_re = a.g_half[2 * at], g_im = -a.g_half[2 * at + 1];
  }
  const double rr = a.row_factor[2 * i], ri = a.row_factor[2 * i + 1], cr = a.col_factor[2 * j], ci = a.col_factor[2 * j + 1];
  const double f_re = rr * cr - ri * ci, f_im = rr * ci + ri * cr;          // row · col
  const double t_re = g_re * f_re - g_im * f_im, t_im = g_re * f_im + g_im * f_re;  // G · (row · col)
  // w = e (k − ν only; |Γ| = 1), −e* (k + ν only), or 2i·sin χ / max(2|sin χ|, 1e-8) (both).
  const double e_re = a.e_chi[2 * q], e_im = a.e_chi[2 * q + 1];
  double w_re, w_im;
  if (minus && plus) {
    const double two_sin = 2 * e_im;
    w_re = 0.0, w_im = two_sin / std::max(std::fabs(two_sin), 1e-8);
  } else {
    w_re = minus ? e_re : -e_re, w_im = e_im;
  }
  out[0] = static_cast<float>(t_re * w_re - t_im * w_im);
  out[1] = static_cast<float>(t_re * w_im + t_im * w_re);
}

// Fills plane (rows x cols complex64) for a pixel inside the aperture.
void fill_quadratic_plane(const QuadraticPlane& a, float* plane);

}  // namespace tmorph::cpu
