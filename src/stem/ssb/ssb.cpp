// Single-sideband ptychography preview. Conventions and the derivation they follow from: ssb.h.
#include "stem/ssb/ssb.h"

#include <fftw3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <complex>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>

#include "support/fftfreq.h"
#include "support/fftw_lock.h"
#include "support/large_buffer.h"
#include "support/thread_pool.h"
#include "ops/kernel_call.h"
#include "stem/calibration.h"
#include "tensormorph/error.h"
#include "tensormorph/op_contracts.h"

namespace tmorph {

namespace {

std::string mib(uint64_t bytes) {
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return s.str();
}

bool positive(double x) { return std::isfinite(x) && x > 0; }

// Complex64 elements per bright-field pixel in G: the half plane Rr × (Rc/2 + 1), rounded up to a multiple of
// 8 (64 bytes) so that every pixel's slice has the alignment of the first (one FFTW plan serves all).
uint64_t g_stride(uint64_t rows, uint64_t cols) { return (rows * (cols / 2 + 1) + 7) / 8 * 8; }

// What the admission counts (ssb.h): G, one batch of frames, per reduction group a complex64 plane and
// float64 accumulators, the ν and e^{iχ(ν)} tables, per-pixel means and the outputs.
uint64_t needed_bytes(uint64_t B, uint64_t rows, uint64_t cols, uint64_t batch_bytes) {
  const uint64_t N = rows * cols;
  return B * g_stride(rows, cols) * 8 + batch_bytes + tm_ssb_cpu_workspace_bytes(B, rows, cols) + N * 32 + B * 8 + N * 16 +
         B * (rows + cols) * 16 + N * 32;
}

// Calls f(T{}) with T the C++ type of an SsbFrames dtype (U8, U16, U32, U64, F32, else F64).
template <class F>
void with_frame_type(DType dt, F&& f) {
  switch (dt) {
    case DType::U8: f(uint8_t{}); break;
    case DType::U16: f(uint16_t{}); break;
    case DType::U32: f(uint32_t{}); break;
    case DType::U64: f(uint64_t{}); break;
    case DType::F32: f(float{}); break;
    default: f(double{}); break;
  }
}

// One frame's bright-field values, converted to float32, to dst[b · dst_stride].
template <class T>
void pick_bright_field(const T* frame, const std::vector<uint32_t>& pixels, float* dst, uint64_t dst_stride) {
  for (size_t b = 0; b < pixels.size(); ++b) dst[b * dst_stride] = static_cast<float>(frame[pixels[b]]);
}

// Frames [first, first + count) into G's real layout: pixel b's value at scan (r, c) goes to
// g[b·2·stride + r·padded_cols + c].
void gather(const uint8_t* frames, DType dt, uint64_t count, uint64_t frame_pixels, uint64_t first, uint64_t cols,
            const std::vector<uint32_t>& pixels, float* g, uint64_t stride, uint64_t padded_cols, ThreadPool& pool) {
  with_frame_type(dt, [&](auto zero) {
    using T = decltype(zero);
    const auto* f = reinterpret_cast<const T*>(frames);
    pool.parallel_for(count, [&](uint64_t begin, uint64_t end, unsigned) {
      for (uint64_t p = begin; p < end; ++p) {
        const uint64_t pos = first + p;
        pick_bright_field(f + p * frame_pixels, pixels, g + pos / cols * padded_cols + pos % cols, stride * 2);
      }
    });
  });
}

// Bright-field values (count × B, position-major, as fill_bright_field writes them) into G's real layout.
void scatter(const float* values, uint64_t count, uint64_t first, uint64_t cols, uint64_t B, float* g, uint64_t stride,
             uint64_t padded_cols, ThreadPool& pool) {
  pool.parallel_for(count, [&](uint64_t begin, uint64_t end, unsigned) {
    for (uint64_t p = begin; p < end; ++p) {
      const uint64_t pos = first + p;
      float* dst = g + pos / cols * padded_cols + pos % cols;
      for (uint64_t b = 0; b < B; ++b) dst[b * stride * 2] = values[p * B + b];
    }
  });
}

}  // namespace

void ssb_extract_bright_field(const uint8_t* frames, DType dtype, uint64_t count, uint64_t frame_pixels,
                              const std::vector<uint32_t>& pixels, float* out) {
  with_frame_type(dtype, [&](auto zero) {
    using T = decltype(zero);
    const auto* f = reinterpret_cast<const T*>(frames);
    for (uint64_t p = 0; p < count; ++p) pick_bright_field(f + p * frame_pixels, pixels, out + p * pixels.size(), 1);
  });
}

SsbFrames ssb_frames_from_loader(StemLoader& loader) {
  SsbFrames f;
  f.dtype = loader.plan().output_dtype;
  f.fill = [&loader](uint64_t first, uint64_t count, uint8_t* out) { loader.fill(first, count, out); };
  return f;
}

SsbFrames ssb_frames_from_array(const StemArray& array) {
  SsbFrames f;
  f.dtype = array.dtype;
  const uint64_t frame_bytes = array.shape[2] * array.shape[3] * dtype_size(array.dtype);
  const uint8_t* data = array.data.get();
  f.fill = [data, frame_bytes](uint64_t first, uint64_t count, uint8_t* out) {
    std::memcpy(out, data + first * frame_bytes, count * frame_bytes);
  };
  f.batch_bytes = uint64_t{16} << 20;  // a copy of resident frames: keep it small
  return f;
}

bool ssb_quadratic(const Aberrations& ab) {
  for (double c : ab.higher_A)
    if (c != 0) return false;
  return true;
}

double ssb_chi(double k_row, double k_col, double wavelength_A, const Aberrations& ab) {
  const double a2 = wavelength_A * wavelength_A * (k_row * k_row + k_col * k_col);  // α²
  double c = ab.C10_A;
  const double phi = a2 > 0 ? std::atan2(k_row, k_col) : 0.0;  // from +column towards +row
  if (ab.C12_A != 0 && a2 > 0) c += ab.C12_A * std::cos(2 * (phi - ab.phi12_deg * M_PI / 180));
  double chi = M_PI / wavelength_A * a2 * c;
  if (a2 > 0 && !ssb_quadratic(ab)) {
    const double alpha = std::sqrt(a2);
    for (int i = 0; i < kHigherOrders; ++i) {
      if (ab.higher_A[i] == 0) continue;
      const int n = kHigherOrderNames[i][1] - '0', m = kHigherOrderNames[i][2] - '0';
      chi += 2 * M_PI / wavelength_A * ab.higher_A[i] * std::pow(alpha, n + 1) / (n + 1) *
             std::cos(m * (phi - ab.higher_deg[i] * M_PI / 180));
    }
  }
  return chi;
}

std::vector<uint32_t> ssb_bright_field_pixels(uint64_t det_rows, uint64_t det_cols, const SsbCalibration& cal,
                                              const std::vector<uint32_t>& excluded) {
  std::vector<uint32_t> sorted_excluded = excluded;
  std::sort(sorted_excluded.begin(), sorted_excluded.end());
  std::vector<uint32_t> out;
  const auto cr = static_cast<float>(cal.disk_row), cc = static_cast<float>(cal.disk_col);
  const auto radius = static_cast<float>(cal.disk_radius_px);
  for (uint64_t k = 0; k < det_rows; ++k)
    for (uint64_t l = 0; l < det_cols; ++l) {
      const float dr = static_cast<float>(k) - cr, dc = static_cast<float>(l) - cc;  // as annulus_pixels
      const auto i = static_cast<uint32_t>(k * det_cols + l);
      if (sqrtf(dr * dr + dc * dc) <= radius && !std::binary_search(sorted_excluded.begin(), sorted_excluded.end(), i))
        out.push_back(i);
    }
  return out;
}

struct SsbProblem::State {
  uint64_t R = 0, C = 0, N = 0, B = 0, det_cols = 0;
  SsbCalibration cal;
  unsigned threads = 1;
  double lambda = 0, dk = 0, kmax2 = 0;
  std::vector<uint32_t> pixels;
  std::vector<double> mean;  // Ī_b
  LargeBuffer g;             // B slices of g_stride complex64: the half-plane spectra G_b
  uint64_t stride = 0, half_cols = 0;
  Placement quadratic_at, direct_at;  // where stem.ssb_overlap runs for each variant
  mutable LargeBuffer workspace;      // the CPU kernel's scratch, reused by every evaluation
  mutable std::mutex mutex;           // one evaluate() at a time (the scratch is shared)
  uint64_t memory = 0;
  double prepare_seconds = 0;
};

SsbProblem::SsbProblem(const SsbFrames& frames, uint64_t scan_rows, uint64_t scan_cols, uint64_t det_rows,
                       uint64_t det_cols, const SsbCalibration& cal, unsigned threads, uint64_t memory_budget_bytes,
                       const Planner& planner)
    : s_(std::make_unique<State>()) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto invalid = [](const std::string& m) { throw Error(ErrorKind::InvalidArgument, "SSB: " + m); };
  if (scan_rows < 2 || scan_cols < 2)
    invalid("the scan must be at least 2 x 2 positions, have " + std::to_string(scan_rows) + " x " + std::to_string(scan_cols));
  if (det_rows == 0 || det_cols == 0 || det_rows * det_cols > (uint64_t{1} << 32)) invalid("bad detector shape");
  if (!positive(cal.energy_ev)) invalid("the energy must be positive (eV), have " + std::to_string(cal.energy_ev));
  if (!positive(cal.semiangle_mrad))
    invalid("the convergence semi-angle must be positive (mrad), have " + std::to_string(cal.semiangle_mrad));
  if (!positive(cal.scan_step_A)) invalid("the scan step must be positive (angstrom), have " + std::to_string(cal.scan_step_A));
  if (!positive(cal.detector_mrad_per_px))
    invalid("the detector pixel size must be positive (mrad per pixel), have " + std::to_string(cal.detector_mrad_per_px));
  if (!std::isfinite(cal.disk_row) || !std::isfinite(cal.disk_col) || cal.disk_row < 0 || cal.disk_col < 0 ||
      cal.disk_row > static_cast<double>(det_rows - 1) || cal.disk_col > static_cast<double>(det_cols - 1))
    invalid("the bright-field disk centre (" + std::to_string(cal.disk_row) + ", " + std::to_string(cal.disk_col) +
            ") is outside the " + std::to_string(det_rows) + " x " + std::to_string(det_cols) + " detector");
  if (!positive(cal.disk_radius_px)) invalid("the bright-field disk radius must be positive, have " + std::to_string(cal.disk_radius_px));
  const DType dt = frames.dtype;
  if (dt != DType::U8 && dt != DType::U16 && dt != DType::U32 && dt != DType::U64 && dt != DType::F32 && dt != DType::F64)
    invalid("frames must be uint8, uint16, uint32, uint64, float32 or float64");
  if (!frames.fill && !frames.fill_bright_field) invalid("no frame source");
  threads = std::max(1u, threads);

  State& S = *s_;
  S.pixels = ssb_bright_field_pixels(det_rows, det_cols, cal, frames.excluded_pixels);
  if (S.pixels.empty())
    invalid("no bright-field pixel inside radius " + std::to_string(cal.disk_radius_px) + " of (" + std::to_string(cal.disk_row) +
            ", " + std::to_string(cal.disk_col) + ")");
  const uint64_t B = S.pixels.size(), R = scan_rows, C = scan_cols, N = R * C;
  const uint64_t frame_bytes = det_rows * det_cols * dtype_size(dt);
  const uint64_t batch = std::min(N, std::max<uint64_t>(1, frames.batch_bytes / frame_bytes));

  // Memory admission, before anything is allocated.
  const uint64_t need = needed_bytes(B, R, C, batch * frame_bytes);
  if (memory_budget_bytes && need > memory_budget_bytes) {
    std::ostringstream m;
    m << "SSB: needs " << mib(need) << " (G: " << B << " bright-field pixels x " << R << " x " << (C / 2 + 1)
      << " complex64 = " << mib(B * g_stride(R, C) * 8) << ") but the memory budget is " << mib(memory_budget_bytes)
      << ". Fallbacks:";
    uint64_t rows_fit = 0;
    for (uint64_t r = R; r >= 2; --r)
      if (needed_bytes(B, r, C, std::min(r * C, batch) * frame_bytes) <= memory_budget_bytes) {
        rows_fit = r;
        break;
      }
    if (rows_fit) m << " crop the scan to " << rows_fit << " of " << R << " rows (--scan-region);";
    for (uint64_t bin = 2; bin <= 64; bin *= 2) {
      const uint64_t Bb = (B + bin * bin - 1) / (bin * bin);
      const uint64_t nb = needed_bytes(Bb, R, C, std::min(N, batch * bin * bin) * frame_bytes / (bin * bin));
      if (nb <= memory_budget_bytes) {
        m << " bin the detector by " << bin << " (about " << Bb << " bright-field pixels, " << mib(nb) << ");";
        break;
      }
    }
    for (uint64_t b = B; b >= 1; --b)
      if (needed_bytes(b, R, C, batch * frame_bytes) <= memory_budget_bytes) {
        m << " use at most " << b << " bright-field pixels (a smaller disk radius);";
        break;
      }
    m << " or raise the budget.";
    throw Error(ErrorKind::PrecisionRefused, m.str());
  }

  S.R = R, S.C = C, S.N = N, S.B = B, S.det_cols = det_cols, S.cal = cal, S.threads = threads, S.memory = need;
  S.lambda = electron_wavelength_A(cal.energy_ev);
  S.dk = cal.detector_mrad_per_px * 1e-3 / S.lambda;  // 1/Å per detector pixel
  S.kmax2 = std::pow(cal.semiangle_mrad * 1e-3 / S.lambda, 2);
  S.stride = g_stride(R, C), S.half_cols = C / 2 + 1;
  const uint64_t stride = S.stride, padded_cols = 2 * S.half_cols;
  ThreadPool& pool = ThreadPool::shared(threads);

  // G's storage: per BF pixel first the real intensities, rows padded to 2·(Rc/2 + 1) floats, then in place
  // the half-plane spectrum.
  S.g = LargeBuffer(B * stride * sizeof(fftwf_complex));
  auto* g = reinterpret_cast<fftwf_complex*>(S.g.get());
  const auto slice = [&](uint64_t b) { return g + b * stride; };
  fftwf_plan r2c;
  {
    std::lock_guard<std::mutex> lock(fftw_planner_mutex());
    // FFTW_ESTIMATE does not touch the arrays while planning.
    r2c = fftwf_plan_dft_r2c_2d(static_cast<int>(R), static_cast<int>(C), reinterpret_cast<float*>(slice(0)), slice(0), FFTW_ESTIMATE);
  }
  struct PlanFree {
    fftwf_plan p;
    ~PlanFree() {
      std::lock_guard<std::mutex> lock(fftw_planner_mutex());
      fftwf_destroy_plan(p);
    }
  } r2c_free{r2c};
  S.workspace = LargeBuffer(tm_ssb_cpu_workspace_bytes(B, R, C));

  // Where the per-pixel work runs (planner.h), for each variant of the aberration function.
  OpRequest op;
  op.op = TM_OP_STEM_SSB_OVERLAP;
  op.dtype = DType::F32;
  op.elements = 2 * B * stride;
  op.bytes = B * stride * 8;
  op.memory_budget_bytes = memory_budget_bytes;
  op.format_id = TM_SSB_QUADRATIC, op.format_name = "quadratic aberrations (C10, C12)";
  S.quadratic_at = planner.place(op);
  op.format_id = TM_SSB_DIRECT, op.format_name = "higher-order aberrations (direct overlap)";
  S.direct_at = planner.place(op);

  // Stream the frames once, keeping the BF pixels' intensities (float32).
  {
    auto* gr = reinterpret_cast<float*>(g);
    if (frames.fill_bright_field) {
      std::vector<float> values(batch * B);
      for (uint64_t first = 0; first < N; first += batch) {
        const uint64_t n = std::min(batch, N - first);
        frames.fill_bright_field(first, n, S.pixels, values.data());
        scatter(values.data(), n, first, C, B, gr, stride, padded_cols, pool);
      }
    } else {
      LargeBuffer batch_buf(batch * frame_bytes);
      for (uint64_t first = 0; first < N; first += batch) {
        const uint64_t n = std::min(batch, N - first);
        frames.fill(first, n, batch_buf.get());
        gather(batch_buf.get(), dt, n, det_rows * det_cols, first, C, S.pixels, gr, stride, padded_cols, pool);
      }
    }
  }
  // Per BF pixel: the mean over the scan, subtracted, then the in-place real-to-complex FFT.
  S.mean.assign(B, 0);
  pool.parallel_for(B, [&](uint64_t begin, uint64_t end, unsigned) {
    for (uint64_t b = begin; b < end; ++b) {
      auto* real = reinterpret_cast<float*>(slice(b));
      double sum = 0;
      for (uint64_t r = 0; r < R; ++r)
        for (uint64_t c = 0; c < C; ++c) sum += real[r * padded_cols + c];
      S.mean[b] = sum / static_cast<double>(N);
      for (uint64_t r = 0; r < R; ++r)
        for (uint64_t c = 0; c < C; ++c) real[r * padded_cols + c] = static_cast<float>(real[r * padded_cols + c] - S.mean[b]);
      fftwf_execute_dft_r2c(r2c, real, slice(b));
    }
  });
  S.prepare_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

SsbProblem::~SsbProblem() = default;
uint64_t SsbProblem::bf_pixels() const { return s_->B; }
uint64_t SsbProblem::memory_bytes() const { return s_->memory; }
double SsbProblem::prepare_seconds() const { return s_->prepare_seconds; }

SsbProblem::View SsbProblem::view() const {
  const State& S = *s_;
  View v;
  v.rows = S.R, v.cols = S.C, v.det_cols = S.det_cols, v.pixels = &S.pixels, v.means = &S.mean, v.calibration = S.cal;
  v.wavelength_A = S.lambda, v.dk_per_px = S.dk, v.threads = S.threads;
  v.spectra = reinterpret_cast<const float*>(S.g.get()), v.stride = S.stride;
  return v;
}

SsbResult SsbProblem::evaluate(const Aberrations& ab, double scan_rotation_deg, bool with_images) const {
  const auto t0 = std::chrono::steady_clock::now();
  if (!std::isfinite(scan_rotation_deg)) throw Error(ErrorKind::InvalidArgument, "SSB: the scan rotation must be finite");
  if (!std::isfinite(ab.C10_A) || !std::isfinite(ab.C12_A) || !std::isfinite(ab.phi12_deg))
    throw Error(ErrorKind::InvalidArgument, "SSB: aberrations must be finite");
  for (int i = 0; i < kHigherOrders; ++i)
    if (!std::isfinite(ab.higher_A[i]) || !std::isfinite(ab.higher_deg[i]))
      throw Error(ErrorKind::InvalidArgument, std::string("SSB: aberration ") + kHigherOrderNames[i] + " must be finite");
  const bool quadratic = ssb_quadratic(ab);
  const State& S = *s_;
  std::lock_guard<std::mutex> serial(S.mutex);
  const uint64_t R = S.R, C = S.C, N = S.N, B = S.B;
  const double lambda = S.lambda, kmax2 = S.kmax2, step = S.cal.scan_step_A;

  // χ's quadratic form in (row, col): χ(k) = kᵀMk, M = πλ·[[C10 − C12·cos 2φ12, C12·sin 2φ12],
  // [C12·sin 2φ12, C10 + C12·cos 2φ12]] (ssb.h: cos 2(φ − φ12)·|k|² = cos 2φ12·(kc² − kr²) + sin 2φ12·2·kr·kc).
  const double p12 = ab.phi12_deg * M_PI / 180;
  const double m_rr = M_PI * lambda * (ab.C10_A - ab.C12_A * std::cos(2 * p12));
  const double m_cc = M_PI * lambda * (ab.C10_A + ab.C12_A * std::cos(2 * p12));
  const double m_rc = M_PI * lambda * ab.C12_A * std::sin(2 * p12);

  // Detector-frame ν per scan DFT bin, ν = R(θ)·ν_s (ssb.h), and e^{iχ(ν)}.
  const double th = scan_rotation_deg * M_PI / 180, ct = std::cos(th), st = std::sin(th);
  std::vector<double> fr(R), fc(C);
  for (uint64_t i = 0; i < R; ++i) fr[i] = fftfreq(i, R) / step;
  for (uint64_t j = 0; j < C; ++j) fc[j] = fftfreq(j, C) / step;
  std::vector<double> nu(2 * N);  // (row, col) per bin
  std::vector<std::complex<double>> e_chi(N);
  for (uint64_t i = 0; i < R; ++i)
    for (uint64_t j = 0; j < C; ++j) {
      const uint64_t q = i * C + j;
      const double vr = ct * fr[i] - st * fc[j], vc = st * fr[i] + ct * fc[j];
      nu[2 * q] = vr, nu[2 * q + 1] = vc;
      const double chi = m_rr * vr * vr + 2 * m_rc * vr * vc + m_cc * vc * vc;
      e_chi[q] = {std::cos(chi), std::sin(chi)};
    }

  // The per-pixel factors of the separable overlap: conj(e^{i·2Bχ(k_b, ν)}) = row factor(i) · column factor(j).
  std::vector<double> pixel_k(2 * B), dc(B), row_f, col_f;
  for (uint64_t b = 0; b < B; ++b) {
    const uint32_t pix = S.pixels[b];
    pixel_k[2 * b] = (static_cast<double>(pix / S.det_cols) - S.cal.disk_row) * S.dk;
    pixel_k[2 * b + 1] = (static_cast<double>(pix % S.det_cols) - S.cal.disk_col) * S.dk;
    dc[b] = static_cast<double>(N) * S.mean[b];  // the DC term: N·Ī_b (Γ := 1)
  }
  if (quadratic) {
    row_f.resize(2 * B * R), col_f.resize(2 * B * C);
    ThreadPool::shared(S.threads).parallel_for(B, [&](uint64_t begin, uint64_t end, unsigned) {
      for (uint64_t b = begin; b < end; ++b) {
        const double kr = pixel_k[2 * b], kc = pixel_k[2 * b + 1];
        const double gr = 2 * (m_rr * kr + m_rc * kc), gc = 2 * (m_rc * kr + m_cc * kc);
        const double wr = gr * ct + gc * st, wc = -gr * st + gc * ct;
        for (uint64_t i = 0; i < R; ++i) row_f[2 * (b * R + i)] = std::cos(wr * fr[i]), row_f[2 * (b * R + i) + 1] = -std::sin(wr * fr[i]);
        for (uint64_t j = 0; j < C; ++j) col_f[2 * (b * C + j)] = std::cos(wc * fc[j]), col_f[2 * (b * C + j) + 1] = -std::sin(wc * fc[j]);
      }
    });
  }
  // χ as the direct variant's terms (ssb.h): (π/λ)·α²·C10 = πλ·C10·|k|², the same for C12 with
  // cos 2(φ − φ12), and (2π/λ)·C_nm·α^(n+1)/(n+1) = 2π·C_nm·λ^n/(n+1)·|k|^(n+1).
  std::vector<tm_ssb_chi_term_v1> terms;
  if (!quadratic) {
    terms.push_back({M_PI * lambda * ab.C10_A, 2, 0, 0});
    terms.push_back({M_PI * lambda * ab.C12_A, 2, 2, ab.phi12_deg * M_PI / 180});
    for (int t = 0; t < kHigherOrders; ++t) {
      if (ab.higher_A[t] == 0) continue;
      const int n = kHigherOrderNames[t][1] - '0', m = kHigherOrderNames[t][2] - '0';
      terms.push_back({2 * M_PI * ab.higher_A[t] * std::pow(lambda, n) / (n + 1), static_cast<double>(n + 1),
                       static_cast<double>(m), ab.higher_deg[t] * M_PI / 180});
    }
  }
  tm_stem_ssb_params_v1 params{};
  params.variant = quadratic ? TM_SSB_QUADRATIC : TM_SSB_DIRECT;
  params.chi_term_count = static_cast<uint32_t>(terms.size());
  params.rows = R, params.cols = C, params.pixels = B, params.slice_stride = S.stride, params.kmax2 = kmax2;
  params.pixel_k = pixel_k.data(), params.dc = dc.data(), params.nu = nu.data();
  params.e_chi = quadratic ? reinterpret_cast<const double*>(e_chi.data()) : nullptr;
  params.row_factor = quadratic ? row_f.data() : nullptr, params.col_factor = quadratic ? col_f.data() : nullptr;
  params.chi_terms = terms.empty() ? nullptr : terms.data();
  params.workspace = S.workspace.get(), params.workspace_bytes = S.workspace.size();
  std::vector<double> sums(4 * N);  // per position: Σ Re O_b, Σ Im O_b, Σ arg O_b, Σ (arg O_b)²
  const Placement& at = quadratic ? S.quadratic_at : S.direct_at;
  run_placed_kernel(at, TM_OP_STEM_SSB_OVERLAP,
                    {DType::F32, S.g.get(), 2 * B * S.stride, &params, sizeof params, sums.data(), sums.size() * 8, S.threads});

  SsbResult out;
  out.rows = R, out.cols = C, out.bf_pixels = B, out.memory_bytes = S.memory, out.placement = at;
  double mean_intensity = 0;
  for (double m : S.mean) mean_intensity += m;
  mean_intensity /= static_cast<double>(B);
  if (with_images) {
    out.phase.resize(N);
    out.amplitude.resize(N);
  }
  double loss = 0;
  const double inv_b = 1.0 / static_cast<double>(B);
  for (uint64_t q = 0; q < N; ++q) {
    std::complex<double> o(sums[4 * q], sums[4 * q + 1]);
    const double a = sums[4 * q + 2], a2 = sums[4 * q + 3];
    if (with_images) {
      o *= inv_b;
      out.phase[q] = std::arg(o);
      out.amplitude[q] = mean_intensity > 0 ? std::abs(o) / mean_intensity : 0.0;
    }
    const double m = a * inv_b;
    loss += std::max(0.0, a2 * inv_b - m * m);
  }
  out.loss = loss / static_cast<double>(N);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

SsbResult ssb_reconstruct(const SsbFrames& frames, uint64_t scan_rows, uint64_t scan_cols, uint64_t det_rows,
                          uint64_t det_cols, const SsbCalibration& cal, const Aberrations& ab, unsigned threads,
                          uint64_t memory_budget_bytes, const Planner& planner) {
  if (!std::isfinite(cal.scan_rotation_deg)) throw Error(ErrorKind::InvalidArgument, "SSB: the scan rotation must be finite");
  if (!std::isfinite(ab.C10_A) || !std::isfinite(ab.C12_A) || !std::isfinite(ab.phi12_deg))
    throw Error(ErrorKind::InvalidArgument, "SSB: aberrations must be finite");
  const SsbProblem problem(frames, scan_rows, scan_cols, det_rows, det_cols, cal, threads, memory_budget_bytes, planner);
  SsbResult r = problem.evaluate(ab, cal.scan_rotation_deg);
  r.seconds += problem.prepare_seconds();
  return r;
}

}  // namespace tmorph
