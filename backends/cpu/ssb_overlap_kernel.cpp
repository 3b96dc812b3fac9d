#include "ssb_overlap_kernel.h"

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>
#include <mutex>

#include "ssb_phase_sums.h"
#include "ssb_quadratic_plane.h"
#include "support/fftw_lock.h"
#include "support/large_buffer.h"
#include "support/thread_pool.h"
#include "tensormorph/contract_math.h"

namespace tmorph::cpu {

namespace {

using cplx = std::complex<double>;

uint64_t round64(uint64_t bytes) { return (bytes + 63) / 64 * 64; }

// χ(x) of the direct variant: Σ_t coefficient·|x|^power·cos(fold·(atan2(x_row, x_col) − angle)).
double chi_of(const tm_stem_ssb_params_v1& p, double r, double c) {
  const double mag2 = r * r + c * c;
  if (mag2 == 0) return 0;
  const double phi = std::atan2(r, c), mag = std::sqrt(mag2);
  double chi = 0;
  for (uint32_t t = 0; t < p.chi_term_count; ++t) {
    const tm_ssb_chi_term_v1& term = p.chi_terms[t];
    const double radial = term.power == 2 ? mag2 : std::pow(mag, term.power);
    chi += term.coefficient * radial * (term.fold == 0 ? 1.0 : std::cos(term.fold * (phi - term.angle)));
  }
  return chi;
}

// The direct variant's plane for a pixel inside the aperture: C_b(q) = G·conj Γ / max(|Γ|, 1e-8) where k_b ∓ ν_q is
// inside, Γ = P(k − ν)·P*(k) − P*(k + ν)·P(k), P = A·e^{−iχ} (op_contracts.h).
void fill_direct_plane(const tm_stem_ssb_params_v1& p, const float* gh, double kr, double kc, fftwf_complex* plane) {
  const uint64_t R = p.rows, C = p.cols, half_cols = C / 2 + 1;
  const double* nu = p.nu;
  const double kmax2 = p.kmax2;
  const cplx p0 = std::polar(1.0, -chi_of(p, kr, kc));
  for (uint64_t i = 0; i < R; ++i)
    for (uint64_t j = 0; j < C; ++j) {
      const uint64_t q = i * C + j;
      cplx cv(0, 0);
      const double mr = kr - nu[2 * q], mc = kc - nu[2 * q + 1], pr = kr + nu[2 * q], pc = kc + nu[2 * q + 1];
      const bool minus = mr * mr + mc * mc <= kmax2, plus = pr * pr + pc * pc <= kmax2;
      if (minus || plus) {
        cplx gv;
        if (j < half_cols) gv = {gh[2 * (i * half_cols + j)], gh[2 * (i * half_cols + j) + 1]};
        else {  // G(−ν) = conj G(ν)
          const uint64_t at = ((R - i) % R) * half_cols + (C - j);
          gv = {gh[2 * at], -gh[2 * at + 1]};
        }
        const cplx pm = minus ? std::polar(1.0, -chi_of(p, mr, mc)) : cplx(0, 0);
        const cplx pp = plus ? std::polar(1.0, -chi_of(p, pr, pc)) : cplx(0, 0);
        const cplx gamma = pm * std::conj(p0) - std::conj(pp) * p0;
        cv = gv * std::conj(gamma) / std::max(std::abs(gamma), 1e-8);
      }
      plane[q][0] = static_cast<float>(cv.real());
      plane[q][1] = static_cast<float>(cv.imag());
    }
}

// Destroys an FFTW plan under the planner lock.
struct PlanGuard {
  fftwf_plan plan = nullptr;
  ~PlanGuard() {
    if (!plan) return;
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    fftwf_destroy_plan(plan);
  }
};

}  // namespace

tm_status run_stem_ssb_overlap(const tm_kernel_call_v1& c, std::string* error) {
  if (!c.params || c.params_size < sizeof(tm_stem_ssb_params_v1)) {
    *error = "stem.ssb_overlap: params missing";
    return TM_ERR_INVALID_ARGUMENT;
  }
  const auto& p = *static_cast<const tm_stem_ssb_params_v1*>(c.params);
  if (std::string why = ssb_call_problem(c, p); !why.empty()) {
    *error = "stem.ssb_overlap: " + why;
    return TM_ERR_INVALID_ARGUMENT;
  }
  const uint64_t R = p.rows, C = p.cols, N = R * C, B = p.pixels;
  const uint64_t groups = std::min<uint64_t>(B, 16);
  const uint64_t plane_bytes = round64(N * 8), sums_bytes = round64(N * 32), group_bytes = plane_bytes + sums_bytes;

  // Scratch: the caller's (64-byte aligned, large enough) or our own.
  LargeBuffer own;
  auto* scratch = static_cast<uint8_t*>(p.workspace);
  if (!scratch || p.workspace_bytes < groups * group_bytes || reinterpret_cast<uintptr_t>(scratch) % 64) {
    own = LargeBuffer(groups * group_bytes);
    scratch = own.get();
  }
  const auto plane_of = [&](uint64_t g) { return reinterpret_cast<fftwf_complex*>(scratch + g * group_bytes); };
  const auto sums_of = [&](uint64_t g) { return reinterpret_cast<double*>(scratch + g * group_bytes + plane_bytes); };

  PlanGuard c2c;
  {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());  // FFTW_ESTIMATE does not touch the arrays
    c2c.plan = fftwf_plan_dft_2d(static_cast<int>(R), static_cast<int>(C), plane_of(0), plane_of(0), FFTW_BACKWARD, FFTW_ESTIMATE);
  }
  if (!c2c.plan) {
    *error = "stem.ssb_overlap: FFTW could not plan a " + std::to_string(R) + " x " + std::to_string(C) + " transform";
    return TM_ERR_INTERNAL;
  }

  const auto* spectra = static_cast<const float*>(c.input);
  const auto* nu = p.nu;
  const double kmax2 = p.kmax2, inv_n = 1.0 / static_cast<double>(N);
  const bool quadratic = p.variant == TM_SSB_QUADRATIC;

  ThreadPool::shared(std::max(1u, c.threads)).parallel_for(groups, [&](uint64_t gbegin, uint64_t gend, unsigned) {
    for (uint64_t gi = gbegin; gi < gend; ++gi) {
      fftwf_complex* plane = plane_of(gi);
      double* sums = sums_of(gi);
      std::fill(sums, sums + 4 * N, 0.0);
      for (uint64_t b = gi * B / groups; b < (gi + 1) * B / groups; ++b) {
        const float* gh = spectra + 2 * b * p.slice_stride;
        const double kr = p.pixel_k[2 * b], kc = p.pixel_k[2 * b + 1];
        const bool inside = kr * kr + kc * kc <= kmax2;  // A(k_b)
        if (!inside) {
          std::memset(plane, 0, N * sizeof(fftwf_complex));
        } else if (quadratic) {
          QuadraticPlane qp;
          qp.rows = R, qp.cols = C, qp.g_half = gh, qp.nu = nu, qp.e_chi = p.e_chi;
          qp.row_factor = p.row_factor + 2 * b * R, qp.col_factor = p.col_factor + 2 * b * C;
          qp.kr = kr, qp.kc = kc, qp.kmax2 = kmax2;
          fill_quadratic_plane(qp, &plane[0][0]);
        } else {
          fill_direct_plane(p, gh, kr, kc, plane);
        }
        plane[0][0] = static_cast<float>(p.dc[b]);  // the DC term (Γ := 1)
        plane[0][1] = 0;
        fftwf_execute_dft(c2c.plan, plane, plane);
        add_phase_sums(&plane[0][0], N, inv_n, sums);  // Σ re, im, arg O_b, arg² (arg within 1e-10 rad of std::arg)
      }
    }
  });
  auto* out = static_cast<double*>(c.output);
  std::memcpy(out, sums_of(0), N * 32);
  for (uint64_t g = 1; g < groups; ++g) {
    const double* s = sums_of(g);
    for (uint64_t k = 0; k < 4 * N; ++k) out[k] += s[k];
  }
  return TM_OK;
}

}  // namespace tmorph::cpu
