// Parallax (tilt-corrected bright-field) estimate of C10, C12, φ12. Contract and derivation: ssb_parallax.h.
#include "stem/ssb/ssb_parallax.h"

#include <fftw3.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <complex>
#include <mutex>
#include <vector>

#include "support/fftfreq.h"
#include "support/fftw_lock.h"
#include "support/thread_pool.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

using cd = std::complex<double>;
using cf = std::complex<float>;

// The windowed spectra W_b of every bright-field image, half planes rows × (cols/2 + 1), b-major.
std::vector<cf> windowed_spectra(const SsbProblem::View& v) {
  const uint64_t R = v.rows, C = v.cols, H = C / 2 + 1, B = v.pixels->size();
  std::vector<double> window(R * C);
  for (uint64_t r = 0; r < R; ++r)
    for (uint64_t c = 0; c < C; ++c) {
      const double wr = std::sin(M_PI * (static_cast<double>(r) + 0.5) / static_cast<double>(R));
      const double wc = std::sin(M_PI * (static_cast<double>(c) + 0.5) / static_cast<double>(C));
      window[r * C + c] = wr * wr * wc * wc;
    }
  std::vector<cf> out(B * R * H);
  std::vector<cf> plan_in(R * H);
  std::vector<float> plan_real(R * C);
  fftwf_plan c2r, r2c;
  {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    const unsigned flags = FFTW_ESTIMATE | FFTW_UNALIGNED;
    c2r = fftwf_plan_dft_c2r_2d(static_cast<int>(R), static_cast<int>(C), reinterpret_cast<fftwf_complex*>(plan_in.data()),
                                plan_real.data(), flags);
    r2c = fftwf_plan_dft_r2c_2d(static_cast<int>(R), static_cast<int>(C), plan_real.data(),
                                reinterpret_cast<fftwf_complex*>(plan_in.data()), flags);
  }
  const unsigned parts = std::max(1u, v.threads);
  ThreadPool::shared(parts).parallel_for(B, [&](uint64_t begin, uint64_t end, unsigned) {
    std::vector<cf> spectrum(R * H);
    std::vector<float> image(R * C);
    for (uint64_t b = begin; b < end; ++b) {
      const auto* g = reinterpret_cast<const cf*>(v.spectrum(b));
      std::copy(g, g + R * H, spectrum.begin());  // c2r overwrites its input
      fftwf_execute_dft_c2r(c2r, reinterpret_cast<fftwf_complex*>(spectrum.data()), image.data());
      double mean = 0, wsum = 0;
      for (uint64_t i = 0; i < R * C; ++i) mean += window[i] * image[i], wsum += window[i];
      mean /= wsum;
      for (uint64_t i = 0; i < R * C; ++i) image[i] = static_cast<float>(window[i] * (image[i] - mean));
      fftwf_execute_dft_r2c(r2c, image.data(), reinterpret_cast<fftwf_complex*>(out.data() + b * R * H));
    }
  });
  {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    fftwf_destroy_plan(c2r);
    fftwf_destroy_plan(r2c);
  }
  return out;
}

struct Peak {
  double row = 0, col = 0;  // scan pixels: the correlation's maximum, d = t_b − t_{b+offset}
  double contrast = 0;      // (peak − mean) / standard deviation of the correlation on the integer grid
  uint64_t pairs = 0;
};

class Correlator {
 public:
  Correlator(const SsbProblem::View& v, std::vector<cf> spectra) : v_(v), w_(std::move(spectra)) {
    R_ = v.rows, C_ = v.cols, H_ = C_ / 2 + 1;
    const uint64_t last = v.pixels->back();
    det_rows_ = last / v.det_cols + 1;
    index_.assign(det_rows_ * v.det_cols, -1);
    for (size_t b = 0; b < v.pixels->size(); ++b) index_[(*v.pixels)[b]] = static_cast<int64_t>(b);
  }

  // The correlation peak for a detector offset (dr, dc) pixels, the integer search limited to `radius` scan
  // pixels around (centre_row, centre_col): for all pairs, and for the even- and odd-numbered pairs apart (their
  // disagreement measures the noise).
  std::array<Peak, 3> measure(int64_t dr, int64_t dc, double centre_row, double centre_col, double radius) const {
    // Pairs (b, b') with pixel(b') = pixel(b) + offset, in pixel order.
    std::vector<std::pair<uint64_t, uint64_t>> pairs;
    const auto& px = *v_.pixels;
    const int64_t cols = static_cast<int64_t>(v_.det_cols), rows = static_cast<int64_t>(det_rows_);
    for (size_t b = 0; b < px.size(); ++b) {
      const int64_t r = px[b] / cols + dr, c = px[b] % cols + dc;
      if (r < 0 || c < 0 || r >= rows || c >= cols) continue;
      const int64_t other = index_[static_cast<uint64_t>(r * cols + c)];
      if (other >= 0) pairs.emplace_back(b, static_cast<uint64_t>(other));
    }
    std::array<Peak, 3> peaks;
    if (pairs.size() < 2) return peaks;
    // Cross-power spectra of the even- and odd-numbered pairs, each frequency summed in pair order
    // (thread-count independent); all pairs = their sum.
    const uint64_t plane = R_ * H_;
    std::vector<cd> even(plane), odd(plane), all(plane);
    ThreadPool::shared(std::max(1u, v_.threads)).parallel_for(plane, [&](uint64_t begin, uint64_t end, unsigned) {
      for (uint64_t q = begin; q < end; ++q) {
        cd sum[2] = {0, 0};
        for (size_t i = 0; i < pairs.size(); ++i)
          sum[i & 1] += cd(w_[pairs[i].first * plane + q]) * std::conj(cd(w_[pairs[i].second * plane + q]));
        even[q] = sum[0], odd[q] = sum[1], all[q] = sum[0] + sum[1];
      }
    });
    peaks[0] = peak_of(all, centre_row, centre_col, radius);
    peaks[1] = peak_of(even, centre_row, centre_col, radius);
    peaks[2] = peak_of(odd, centre_row, centre_col, radius);
    peaks[0].pairs = pairs.size(), peaks[1].pairs = (pairs.size() + 1) / 2, peaks[2].pairs = pairs.size() / 2;
    return peaks;
  }

 private:
  Peak peak_of(const std::vector<cd>& cross, double centre_row, double centre_col, double radius) const {
    Peak peak;
    // The correlation on the integer grid.
    std::vector<double> corr(R_ * C_);
    {
      std::vector<cd> in = cross;  // c2r overwrites its input
      fftw_plan p;
      {
        std::lock_guard<std::mutex> lock(fftw_planner_mutex());
        p = fftw_plan_dft_c2r_2d(static_cast<int>(R_), static_cast<int>(C_), reinterpret_cast<fftw_complex*>(in.data()), corr.data(),
                                 FFTW_ESTIMATE);
      }
      fftw_execute(p);
      std::lock_guard<std::mutex> lock(fftw_planner_mutex());
      fftw_destroy_plan(p);
    }
    double mean = 0, sq = 0;
    for (double x : corr) mean += x, sq += x * x;
    mean /= static_cast<double>(corr.size());
    const double sd = std::sqrt(std::max(0.0, sq / static_cast<double>(corr.size()) - mean * mean));
    // The integer maximum; then, of the local maxima within 70 % of it (above the mean), the one nearest the
    // search centre: a crystal's correlation has a peak at every lattice vector, nearly as high as the true one
    // when the scan spans many unit cells, and the true shift is the smallest (see the header's limits).
    const auto R = static_cast<int64_t>(R_), C = static_cast<int64_t>(C_);
    const auto at = [&](int64_t r, int64_t c) { return corr[static_cast<uint64_t>(((r % R + R) % R) * C + (c % C + C) % C)]; };
    const auto inside = [&](int64_t r, int64_t c) {
      return std::hypot(static_cast<double>(r) - centre_row, static_cast<double>(c) - centre_col) <= radius;
    };
    double best = -INFINITY;
    for (int64_t r = -R / 2; r < (R + 1) / 2; ++r)
      for (int64_t c = -C / 2; c < (C + 1) / 2; ++c)
        if (inside(r, c)) best = std::max(best, at(r, c));
    int64_t br = 0, bc = 0;
    double nearest = INFINITY;
    for (int64_t r = -R / 2; r < (R + 1) / 2; ++r)
      for (int64_t c = -C / 2; c < (C + 1) / 2; ++c) {
        const double x = at(r, c);
        if (!inside(r, c) || x - mean < 0.7 * (best - mean)) continue;
        bool local_max = true;
        for (int i = -1; i <= 1 && local_max; ++i)
          for (int j = -1; j <= 1; ++j)
            if ((i || j) && at(r + i, c + j) > x) local_max = false;
        const double distance = std::hypot(static_cast<double>(r) - centre_row, static_cast<double>(c) - centre_col);
        if (local_max && distance < nearest) nearest = distance, br = r, bc = c;
      }
    peak.contrast = sd > 0 ? (best - mean) / sd : 0;
    // Sub-pixel: the correlation's Fourier series on a 0.1-pixel grid around the integer peak, then 0.01.
    double pr = static_cast<double>(br), pc = static_cast<double>(bc);
    for (const double step : {0.1, 0.01}) {
      double top = -INFINITY, nr = pr, nc = pc;
      for (int i = -6; i <= 6; ++i)
        for (int j = -6; j <= 6; ++j) {
          const double r = pr + i * step, c = pc + j * step, value = series(cross, r, c);
          if (value > top) top = value, nr = r, nc = c;
        }
      pr = nr, pc = nc;
    }
    peak.row = pr, peak.col = pc;
    return peak;
  }

  // Σ over the full plane of C(ν)·e^{2πi ν·d}, from the half plane (C(−ν) = conj C(ν)).
  double series(const std::vector<cd>& cross, double dr, double dc) const {
    std::vector<cd> col_phase(H_);
    for (uint64_t j = 0; j < H_; ++j) col_phase[j] = std::polar(1.0, 2 * M_PI * fftfreq(j, C_) * dc);
    if (C_ % 2 == 0) col_phase[H_ - 1] = std::polar(1.0, 2 * M_PI * 0.5 * dc);  // the Nyquist column, +½
    double total = 0;
    for (uint64_t i = 0; i < R_; ++i) {
      const cd row_phase = std::polar(1.0, 2 * M_PI * fftfreq(i, R_) * dr);
      cd s = 0;
      for (uint64_t j = 0; j < H_; ++j) {
        const double weight = (j == 0 || (C_ % 2 == 0 && j == H_ - 1)) ? 1.0 : 2.0;
        s += weight * cross[i * H_ + j] * col_phase[j];
      }
      total += (s * row_phase).real();
    }
    return total;
  }

  const SsbProblem::View& v_;
  std::vector<cf> w_;
  uint64_t R_ = 0, C_ = 0, H_ = 0, det_rows_ = 0;
  std::vector<int64_t> index_;
};

}  // namespace

ParallaxEstimate ssb_parallax_estimate(const SsbProblem& problem, double scan_rotation_deg) {
  const auto t0 = std::chrono::steady_clock::now();
  const SsbProblem::View v = problem.view();
  if (v.rows < 8 || v.cols < 8)
    throw Error(ErrorKind::InvalidArgument, "SSB parallax estimate: the scan must be at least 8 x 8 positions, have " +
                                                std::to_string(v.rows) + " x " + std::to_string(v.cols));
  if (!std::isfinite(scan_rotation_deg)) throw Error(ErrorKind::InvalidArgument, "SSB parallax estimate: the scan rotation must be finite");
  const Correlator corr(v, windowed_spectra(v));
  ParallaxEstimate e;
  e.peak_contrast = INFINITY;
  const double quarter = static_cast<double>(std::min(v.rows, v.cols)) / 4;

  // m = 1 on both axes, then M from the larger shift (at least 2 where the disk allows, for a residual).
  std::array<std::vector<std::array<Peak, 3>>, 2> peaks;
  for (int axis = 0; axis < 2; ++axis) {
    const std::array<Peak, 3> p = corr.measure(axis == 0 ? 1 : 0, axis == 1 ? 1 : 0, 0, 0, quarter);
    if (p[0].pairs < 2)
      throw Error(ErrorKind::InvalidArgument, "SSB parallax estimate: the bright-field disk has fewer than 2 neighbouring pixel pairs");
    peaks[axis].push_back(p);
  }
  const double per_px = std::max(std::hypot(peaks[0][0][0].row, peaks[0][0][0].col), std::hypot(peaks[1][0][0].row, peaks[1][0][0].col));
  const auto radius_limit = static_cast<unsigned>(std::max(1.0, std::floor(v.calibration.disk_radius_px / 2)));
  e.offsets = std::clamp(static_cast<unsigned>(std::floor(3.0 / std::max(per_px, 0.05))), std::min(2u, radius_limit),
                         std::min(radius_limit, 8u));
  for (int axis = 0; axis < 2; ++axis)
    for (unsigned m = 2; m <= e.offsets; ++m) {
      const Peak& first = peaks[axis][0][0];
      const auto mm = static_cast<int64_t>(m);
      peaks[axis].push_back(corr.measure(axis == 0 ? mm : 0, axis == 1 ? mm : 0, m * first.row, m * first.col, 2.0));
    }

  // Columns of A by least squares through the origin: A·e_axis·m = −d_m. The noise of each d_m from its two
  // halves: the full set's standard error per component is |d_even − d_odd| / 2.
  double sum_m2 = 0, residual2 = 0, split2 = 0;
  for (unsigned m = 1; m <= e.offsets; ++m) sum_m2 += static_cast<double>(m) * m;
  for (int axis = 0; axis < 2; ++axis) {
    double ar = 0, ac = 0;
    for (unsigned m = 1; m <= e.offsets; ++m) {
      const std::array<Peak, 3>& p = peaks[axis][m - 1];
      ar -= m * p[0].row, ac -= m * p[0].col;
      e.pairs += p[0].pairs;
      e.peak_contrast = std::min(e.peak_contrast, p[0].contrast);
      split2 += (std::pow(p[1].row - p[2].row, 2) + std::pow(p[1].col - p[2].col, 2)) / 4;
    }
    ar /= sum_m2, ac /= sum_m2;
    e.shift_per_px[0][axis] = ar, e.shift_per_px[1][axis] = ac;
    for (unsigned m = 1; m <= e.offsets; ++m) {
      const Peak& p = peaks[axis][m - 1][0];
      residual2 += std::pow(-p.row - m * ar, 2) + std::pow(-p.col - m * ac, 2);
    }
  }
  // Per component of A: from the residuals (4 unknowns from 4·M numbers), from the split halves (each d_m's
  // variance per component, divided by Σm²), the larger; the floor is the sub-pixel grid's resolution.
  const double dof = std::max(1.0, 4.0 * e.offsets - 4.0);
  const double split_var = split2 / (4.0 * e.offsets);
  const double sigma_a = std::max({std::sqrt(residual2 / dof / sum_m2), std::sqrt(split_var / sum_m2), 0.01 / std::sqrt(sum_m2)});

  // M = −(step / (λ·dk))·R(θ)·A (Å).
  const double scale = -v.calibration.scan_step_A / (v.wavelength_A * v.dk_per_px);
  const double th = scan_rotation_deg * M_PI / 180, ct = std::cos(th), st = std::sin(th);
  const double (&A)[2][2] = e.shift_per_px;
  const double m11 = scale * (ct * A[0][0] - st * A[1][0]), m12 = scale * (ct * A[0][1] - st * A[1][1]);
  const double m21 = scale * (st * A[0][0] + ct * A[1][0]), m22 = scale * (st * A[0][1] + ct * A[1][1]);
  const double c10 = (m11 + m22) / 2, a = (m22 - m11) / 2, b = (m12 + m21) / 2;
  const double norm = std::sqrt(m11 * m11 + m12 * m12 + m21 * m21 + m22 * m22);
  e.asymmetry = norm > 0 ? std::abs(m12 - m21) / 2 / norm * std::sqrt(2.0) : 0;
  const double p11 = scale * A[0][0], p12 = scale * A[0][1], p21 = scale * A[1][0], p22 = scale * A[1][1];
  double implied = std::atan2(p12 - p21, p11 + p22) * 180 / M_PI;
  implied = std::fmod(std::fmod(implied, 180.0) + 180.0, 180.0);
  e.implied_rotation_deg = implied;

  Aberrations& ab = e.aberrations;
  ab.C10_A = c10, ab.C12_A = std::hypot(a, b);
  ab.phi12_deg = ab.C12_A > 0 ? std::atan2(b, a) / 2 * 180 / M_PI : 0;
  if (ab.phi12_deg <= -90) ab.phi12_deg += 180;
  const double sigma_m = std::abs(scale) * sigma_a;
  e.c10_sigma_A = sigma_m / std::sqrt(2.0), e.c12_sigma_A = sigma_m / std::sqrt(2.0);
  e.phi12_sigma_deg = ab.C12_A > 0 ? std::min(90.0, e.c12_sigma_A / ab.C12_A / 2 * 180 / M_PI) : 90.0;
  e.max_shift_px = std::max(std::hypot(A[0][0], A[1][0]), std::hypot(A[0][1], A[1][1])) * v.calibration.disk_radius_px;

  if (e.c10_sigma_A > std::max(0.25 * std::abs(c10), 30.0) || e.c12_sigma_A > std::max(0.25 * ab.C12_A, 30.0))
    e.reason = "the shifts are noisy: standard errors C10 " + std::to_string(e.c10_sigma_A) + " A, C12 " +
               std::to_string(e.c12_sigma_A) + " A (half-sets of pixel pairs and detector offsets disagree)";
  else if (per_px > quarter - 1)
    e.reason = "the image shift per detector pixel (" + std::to_string(per_px) + " scan pixels) reaches the edge of the search "
               "window (a quarter of the scan)";
  e.reliable = e.reason.empty();
  e.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return e;
}

}  // namespace tmorph
