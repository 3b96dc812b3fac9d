// A simulated 4D-STEM acquisition held in memory for the SSB tests (ssb_test.cpp, ssb_fit_test.cpp): its frames,
// calibration and ground-truth phase at each probe position, and the CPU-only planner SSB is placed with.
#pragma once

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "cpu/cpu_backend.h"
#include "stem/demo/simulate.h"
#include "stem/ssb/ssb.h"
#include "test_support.h"

namespace tmorph::test {

// A simulated acquisition held in memory (uint16 frames), its calibration and its ground truth.
struct SimData {
  StemSimulationParams p;
  std::unique_ptr<StemSimulator> sim;
  std::vector<uint16_t> frames;  // N × K × K
  std::vector<double> truth;     // true phase at each scan position's probe centre

  explicit SimData(const StemSimulationParams& params) : p(params), sim(std::make_unique<StemSimulator>(params)) {
    const uint64_t K = p.detector, N = p.scan_rows * p.scan_cols;
    frames.resize(N * K * K);
    for (uint64_t i = 0; i < N; ++i) sim->frame(i, reinterpret_cast<uint8_t*>(frames.data() + i * K * K));
    // The probe of position (r, c) is centred at the window's origin + (K/2, K/2) in the object; origins as
    // StemSimulator places them (the raster, or R(θ)·(r, c)·step about the object's centre, rounded).
    const auto& phase = sim->object_phase();
    const uint64_t oc = sim->object_cols();
    const double th = p.scan_rotation_deg * M_PI / 180, step = static_cast<double>(p.scan_step_px);
    const double half_r = static_cast<double>(p.scan_rows - 1) / 2, half_c = static_cast<double>(p.scan_cols - 1) / 2;
    const double mid = static_cast<double>(sim->object_rows() - K) / 2;
    for (uint64_t r = 0; r < p.scan_rows; ++r)
      for (uint64_t c = 0; c < p.scan_cols; ++c) {
        uint64_t oy = r * p.scan_step_px, ox = c * p.scan_step_px;
        if (p.scan_rotation_deg != 0) {
          const double y = (static_cast<double>(r) - half_r) * step, x = (static_cast<double>(c) - half_c) * step;
          oy = static_cast<uint64_t>(std::llround(mid + y * std::cos(th) - x * std::sin(th)));
          ox = static_cast<uint64_t>(std::llround(mid + y * std::sin(th) + x * std::cos(th)));
        }
        truth.push_back(phase[(oy + K / 2) * oc + ox + K / 2]);
      }
  }

  SsbFrames source() const {
    SsbFrames f;
    f.dtype = DType::U16;
    const uint64_t K = p.detector;
    f.fill = [this, K](uint64_t first, uint64_t count, uint8_t* out) {
      std::memcpy(out, frames.data() + first * K * K, count * K * K * 2);
    };
    const auto mask = sim->pixel_mask();
    for (uint32_t i = 0; i < mask.size(); ++i)
      if (mask[i]) f.excluded_pixels.push_back(i);
    f.batch_bytes = 1 << 20;  // several batches
    return f;
  }

  SsbCalibration calibration() const {
    SsbCalibration c;
    c.energy_ev = p.energy_ev;
    c.semiangle_mrad = p.semiangle_mrad;
    c.scan_step_A = static_cast<double>(p.scan_step_px) * sim->real_pixel_A();
    c.detector_mrad_per_px = sim->detector_mrad_per_px();
    c.scan_rotation_deg = p.scan_rotation_deg;
    c.disk_row = c.disk_col = static_cast<double>(p.detector) / 2;  // the simulator's zero frequency
    c.disk_radius_px = static_cast<double>(p.detector) / 8;
    return c;
  }

  SsbResult run(const SsbCalibration& cal, double c10_A, unsigned threads = 2) const {
    Aberrations ab;
    ab.C10_A = c10_A;
    return ssb_reconstruct(source(), p.scan_rows, p.scan_cols, p.detector, p.detector, cal, ab, threads, 0, cpu_planner());
  }
};

inline double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) ma += a[i], mb += b[i];
  ma /= static_cast<double>(a.size()), mb /= static_cast<double>(b.size());
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) sab += (a[i] - ma) * (b[i] - mb), saa += (a[i] - ma) * (a[i] - ma), sbb += (b[i] - mb) * (b[i] - mb);
  return sab / std::sqrt(saa * sbb);
}

}  // namespace tmorph::test
