#include "stem/demo/simulate.h"

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <limits>
#include <mutex>
#include <random>

#include "support/thread_pool.h"
#include "support/fftw_lock.h"
#include "stem/load.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {


}  // namespace

struct StemSimulator::Fft {
  fftwf_plan forward = nullptr;
  ~Fft() {
    std::lock_guard<std::mutex> g(fftw_planner_mutex());
    if (forward) fftwf_destroy_plan(forward);
  }
};

StemSimulator::StemSimulator(const StemSimulationParams& params) : p_(params), fft_(std::make_unique<Fft>()) {
  const uint64_t K = p_.detector;
  if (K < 8 || K > 4096 || p_.scan_rows == 0 || p_.scan_cols == 0 || p_.scan_step_px == 0)
    throw Error(ErrorKind::InvalidArgument, "simulation: detector must be 8..4096 pixels and the scan non-empty");
  if (p_.dtype != DType::U8 && p_.dtype != DType::U16 && p_.dtype != DType::U32)
    throw Error(ErrorKind::InvalidArgument, "simulation: dtype must be uint8, uint16 or uint32");
  lambda_A_ = electron_wavelength_A(p_.energy_ev);
  bf_radius_ = p_.bf_radius_px > 0 ? p_.bf_radius_px : static_cast<double>(K) / 8;
  const double alpha = p_.semiangle_mrad * 1e-3;
  const double dk = alpha / (lambda_A_ * bf_radius_);  // 1/Å per detector pixel
  dx_A_ = 1.0 / (static_cast<double>(K) * dk);

  // Scan positions: the raster, or the raster turned by scan_rotation_deg about its centre inside an
  // object large enough to hold it.
  const double theta = p_.scan_rotation_deg * M_PI / 180;
  const double step = static_cast<double>(p_.scan_step_px);
  const double half_r = static_cast<double>(p_.scan_rows - 1) / 2, half_c = static_cast<double>(p_.scan_cols - 1) / 2;
  if (p_.scan_rotation_deg == 0) {
    object_rows_ = (p_.scan_rows - 1) * p_.scan_step_px + K;
    object_cols_ = (p_.scan_cols - 1) * p_.scan_step_px + K;
  } else {
    const double reach = std::hypot(half_r, half_c) * step;
    object_rows_ = object_cols_ = static_cast<uint64_t>(std::ceil(2 * reach)) + K + 2;
  }
  origins_.reserve(p_.scan_rows * p_.scan_cols);
  for (uint64_t r = 0; r < p_.scan_rows; ++r)
    for (uint64_t c = 0; c < p_.scan_cols; ++c) {
      if (p_.scan_rotation_deg == 0) {
        origins_.emplace_back(r * p_.scan_step_px, c * p_.scan_step_px);
        continue;
      }
      const double y = (static_cast<double>(r) - half_r) * step, x = (static_cast<double>(c) - half_c) * step;
      const double mid = static_cast<double>(object_rows_ - K) / 2;
      origins_.emplace_back(static_cast<uint64_t>(std::llround(mid + y * std::cos(theta) - x * std::sin(theta))),
                            static_cast<uint64_t>(std::llround(mid + y * std::sin(theta) + x * std::cos(theta))));
    }

  // Object phase: a square lattice of Gaussian atoms.
  phase_.assign(object_rows_ * object_cols_, 0.0f);
  const double sigma_px = p_.atom_sigma_A / dx_A_, a_px = p_.lattice_A / dx_A_;
  const auto reach = static_cast<int64_t>(std::ceil(4 * sigma_px));
  for (double ay = a_px / 2; ay < static_cast<double>(object_rows_); ay += a_px)
    for (double ax = a_px / 2; ax < static_cast<double>(object_cols_); ax += a_px) {
      const int64_t cy = std::llround(ay), cx = std::llround(ax);
      for (int64_t y = std::max<int64_t>(0, cy - reach); y <= std::min<int64_t>(object_rows_ - 1, cy + reach); ++y)
        for (int64_t x = std::max<int64_t>(0, cx - reach); x <= std::min<int64_t>(object_cols_ - 1, cx + reach); ++x) {
          const double d2 = (y - ay) * (y - ay) + (x - ax) * (x - ax);
          phase_[y * object_cols_ + x] += static_cast<float>(p_.peak_phase * std::exp(-d2 / (2 * sigma_px * sigma_px)));
        }
    }

  // Probe: aperture and defocus in reciprocal space, inverse FFT, centred in the window, unit norm.
  fftwf_complex* buf = fftwf_alloc_complex(K * K);
  fftwf_complex* tmp = fftwf_alloc_complex(K * K);
  fftwf_plan backward;
  {
    std::lock_guard<std::mutex> g(fftw_planner_mutex());
    backward = fftwf_plan_dft_2d(static_cast<int>(K), static_cast<int>(K), buf, tmp, FFTW_BACKWARD, FFTW_ESTIMATE);
    fft_->forward = fftwf_plan_dft_2d(static_cast<int>(K), static_cast<int>(K), buf, tmp, FFTW_FORWARD, FFTW_ESTIMATE);
  }
  const double kmax = alpha / lambda_A_, c10_A = p_.defocus_nm * 10, c12_A = p_.astigmatism_nm * 10;
  const auto freq = [&](uint64_t i) { return (i < K / 2 ? static_cast<double>(i) : static_cast<double>(i) - static_cast<double>(K)) * dk; };
  for (uint64_t i = 0; i < K; ++i)
    for (uint64_t j = 0; j < K; ++j) {
      const double k = std::hypot(freq(i), freq(j));
      const double phi = std::atan2(freq(i), freq(j));  // from +column towards +row
      const double c = c10_A + c12_A * std::cos(2 * (phi - p_.astigmatism_deg * M_PI / 180));
      const double a2 = (lambda_A_ * k) * (lambda_A_ * k);
      const double chi = M_PI / lambda_A_ * a2 * c + M_PI / (2 * lambda_A_) * p_.cs_um * 1e4 * a2 * a2;
      const bool inside = k <= kmax;
      buf[i * K + j][0] = inside ? static_cast<float>(std::cos(-chi)) : 0.0f;
      buf[i * K + j][1] = inside ? static_cast<float>(std::sin(-chi)) : 0.0f;
    }
  fftwf_execute(backward);
  double norm = 0;
  for (uint64_t i = 0; i < K * K; ++i) norm += double(tmp[i][0]) * tmp[i][0] + double(tmp[i][1]) * tmp[i][1];
  const double scale = 1.0 / std::sqrt(norm);
  probe_re_.resize(K * K);
  probe_im_.resize(K * K);
  for (uint64_t i = 0; i < K; ++i)
    for (uint64_t j = 0; j < K; ++j) {
      const uint64_t src = ((i + K / 2) % K) * K + (j + K / 2) % K;  // fftshift: probe centre at (K/2, K/2)
      probe_re_[i * K + j] = static_cast<float>(tmp[src][0] * scale);
      probe_im_[i * K + j] = static_cast<float>(tmp[src][1] * scale);
    }
  {
    std::lock_guard<std::mutex> g(fftw_planner_mutex());
    fftwf_destroy_plan(backward);
  }
  fftwf_free(buf);
  fftwf_free(tmp);

  std::mt19937_64 rng(p_.seed * 7919 + 17);
  std::uniform_int_distribution<uint64_t> pick(0, K * K - 1);
  while (dead_.size() < std::min<uint64_t>(p_.dead_pixels, K * K)) {
    const auto i = static_cast<uint32_t>(pick(rng));
    if (std::find(dead_.begin(), dead_.end(), i) == dead_.end()) dead_.push_back(i);
  }
}

StemSimulator::~StemSimulator() = default;

double StemSimulator::detector_mrad_per_px() const { return p_.semiangle_mrad / bf_radius_; }

std::vector<uint32_t> StemSimulator::pixel_mask() const {
  std::vector<uint32_t> mask(p_.detector * p_.detector, 0);
  for (uint32_t i : dead_) mask[i] = 2;  // Dectris bit 2: dead pixel
  return mask;
}

void StemSimulator::frame(uint64_t index, uint8_t* out) const {
  const uint64_t K = p_.detector;
  const auto [oy, ox] = origins_.at(index);
  fftwf_complex* in = fftwf_alloc_complex(K * K);
  fftwf_complex* spectrum = fftwf_alloc_complex(K * K);
  for (uint64_t y = 0; y < K; ++y)
    for (uint64_t x = 0; x < K; ++x) {
      const float phi = phase_[(oy + y) * object_cols_ + ox + x];
      const float c = std::cos(phi), s = std::sin(phi);
      const float pr = probe_re_[y * K + x], pi = probe_im_[y * K + x];
      in[y * K + x][0] = pr * c - pi * s;
      in[y * K + x][1] = pr * s + pi * c;
    }
  fftwf_execute_dft(fft_->forward, in, spectrum);
  std::mt19937_64 rng(p_.seed * 0x9E3779B97F4A7C15ull ^ (index + 1) * 0xD1B54A32D192ED03ull);
  const uint64_t top = unsigned_max(p_.dtype) - 1;  // real counts never reach the sentinel
  const double to_counts = p_.dose / static_cast<double>(K * K);
  for (uint64_t u = 0; u < K; ++u)
    for (uint64_t v = 0; v < K; ++v) {
      const uint64_t src = ((u + K / 2) % K) * K + (v + K / 2) % K;  // zero frequency at the frame centre
      const double mean = (double(spectrum[src][0]) * spectrum[src][0] + double(spectrum[src][1]) * spectrum[src][1]) * to_counts;
      uint64_t count = 0;
      if (mean > 1e-9) count = static_cast<uint64_t>(std::poisson_distribution<int64_t>(mean)(rng));
      count = std::min(count, top);
      const uint64_t i = u * K + v;
      if (p_.dtype == DType::U8) out[i] = static_cast<uint8_t>(count);
      else if (p_.dtype == DType::U16) reinterpret_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(count);
      else reinterpret_cast<uint32_t*>(out)[i] = static_cast<uint32_t>(count);
    }
  const uint64_t sentinel = unsigned_max(p_.dtype);
  for (uint32_t i : dead_) {
    if (p_.dtype == DType::U8) out[i] = static_cast<uint8_t>(sentinel);
    else if (p_.dtype == DType::U16) reinterpret_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(sentinel);
    else reinterpret_cast<uint32_t*>(out)[i] = static_cast<uint32_t>(sentinel);
  }
  fftwf_free(in);
  fftwf_free(spectrum);
}

DectrisMetadata StemSimulator::metadata() const {
  DectrisMetadata m;
  const uint64_t frames = p_.scan_rows * p_.scan_cols;
  const auto put = [&](const std::string& path, nlohmann::json value, const char* units = nullptr) {
    nlohmann::json e = {{"value", value}};
    if (units) e["units"] = units;
    m.scalars[path] = e;
  };
  const std::string det = "entry/instrument/detector/";
  put(det + "description", "Tensormorph simulated 4D-STEM detector (Dectris layout)");
  put(det + "count_time", 1e-4, "s");
  put(det + "frame_time", 1e-4, "s");
  put(det + "bit_depth_image", static_cast<uint64_t>(8 * dtype_size(p_.dtype)));
  put(det + "saturation_value", unsigned_max(p_.dtype) - 1);
  put(det + "x_pixel_size", 100e-6, "m");
  put(det + "y_pixel_size", 100e-6, "m");
  put(det + "detectorSpecific/nimages", uint64_t{1});
  put(det + "detectorSpecific/ntrigger", frames);
  put(det + "detectorSpecific/x_pixels_in_detector", p_.detector);
  put(det + "detectorSpecific/y_pixels_in_detector", p_.detector);
  put("entry/instrument/beam/incident_energy", p_.energy_ev, "eV");
  put("entry/instrument/beam/incident_wavelength", lambda_A_, "angstrom");
  put("entry/instrument/beam/convergence_semi_angle", p_.semiangle_mrad, "mrad");
  const std::string sim = "entry/sample/simulation/";
  put(sim + "scan_rows", p_.scan_rows);
  put(sim + "scan_cols", p_.scan_cols);
  put(sim + "scan_step", static_cast<double>(p_.scan_step_px) * dx_A_, "angstrom");
  put(sim + "scan_rotation", p_.scan_rotation_deg, "degree");
  put(sim + "real_space_pixel", dx_A_, "angstrom");
  put(sim + "detector_angle_per_pixel", detector_mrad_per_px(), "mrad");
  put(sim + "bf_disk_radius", bf_radius_, "pixel");
  put(sim + "defocus", p_.defocus_nm, "nm");
  put(sim + "astigmatism", p_.astigmatism_nm, "nm");
  put(sim + "astigmatism_angle", p_.astigmatism_deg, "degree");
  put(sim + "spherical_aberration", p_.cs_um, "um");
  put(sim + "lattice_constant", p_.lattice_A, "angstrom");
  put(sim + "peak_phase", p_.peak_phase, "rad");
  put(sim + "dose_per_frame", p_.dose, "electrons");
  put(sim + "seed", p_.seed);
  m.pixel_mask = pixel_mask();
  m.images.push_back({sim + "object_phase", object_rows_, object_cols_, phase_});
  return m;
}

std::string write_simulated_acquisition(const StemSimulationParams& params, const DectrisWriterOptions& options, unsigned threads) {
  StemSimulator sim(params);
  const uint64_t K = params.detector, frames = params.scan_rows * params.scan_cols;
  DectrisWriter writer(options, params.dtype, K, K, frames, sim.metadata());
  ThreadPool& pool = ThreadPool::shared(std::max(1u, threads));
  pool.parallel_for(frames, [&](uint64_t begin, uint64_t end, unsigned) {
    std::vector<uint8_t> frame(K * K * dtype_size(params.dtype));
    for (uint64_t i = begin; i < end; ++i) {
      sim.frame(i, frame.data());
      writer.write_frame(i, frame.data());
    }
  });
  writer.finish();
  return writer.master_path();
}

}  // namespace tmorph
