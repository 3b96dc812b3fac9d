// A physically meaningful simulated 4D-STEM acquisition, for demos, tests and benchmarks.
//
// Model (projection approximation, one slice): a weak phase object t(x) = exp(i·φ(x)), φ a square
// lattice of Gaussian atoms scaled to a peak phase; a probe formed by a circular aperture of
// semi-angle α with defocus C10 and two-fold astigmatism C12 at azimuth φ12, P(k) = A(k)·exp(−iχ(k)),
// χ(k) = (π/λ)·(λ|k|)²·[C10 + C12·cos 2(φ − φ12)] + (π/(2λ))·C30·(λ|k|)⁴, φ = atan2(k_row, k_col)
// (src/stem/ssb/ssb.h), normalised to one
// electron; at each scan position the exit wave ψ(x − R)·t(x) is Fourier transformed and the
// diffraction intensity |Ψ(k)|² (zero frequency at the frame centre, unit total) times the dose
// is sampled with Poisson noise. A few dead pixels are flagged in the pixel mask (value 2) and hold the
// dtype's maximum in every frame, as Dectris writes masked pixels.
// Sampling: the detector spans the K × K discrete Fourier grid of a K × K real-space window; the
// bright-field disk radius is `bf_radius_px` detector pixels, which fixes the reciprocal pixel size
// dk = α/(λ·r) and the real-space pixel dx = 1/(K·dk). The scan step is an integer number of dx.
// Every frame is a deterministic function of (parameters, seed, frame index), whatever the threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stem/calibration.h"  // electron_wavelength_A
#include "stem/formats/dectris_writer.h"
#include "tensormorph/dtype.h"

namespace tmorph {

struct StemSimulationParams {
  uint64_t scan_rows = 32, scan_cols = 32;
  uint64_t detector = 64;          // K: frames are K × K
  double energy_ev = 300e3;        // accelerating voltage × e
  double semiangle_mrad = 20;      // probe convergence semi-angle α
  double defocus_nm = 5;           // C10
  double astigmatism_nm = 0;       // C12 (two-fold astigmatism magnitude)
  double astigmatism_deg = 0;      // φ12, from +column towards +row
  double cs_um = 0;                // C30 (spherical aberration), µm: χ += (π/(2λ))·C30·α⁴
  double bf_radius_px = 0;         // 0: K / 8
  uint64_t scan_step_px = 2;       // real-space pixels per scan step
  // The scan's axes turned by this angle against the detector's (and the object's): scan position
  // (r, c) sits at R(θ)·(r, c)·step about the object's centre, rounded to the nearest pixel. A DPC
  // field in scan coordinates is then the detector-frame field turned by −θ, so the DPC rotation that
  // makes it curl-free is −θ (mod π). 0 keeps the unrotated raster exactly.
  double scan_rotation_deg = 0;
  double lattice_A = 2.5;          // atom spacing
  double atom_sigma_A = 0.35;      // Gaussian atom width
  double peak_phase = 0.3;         // radians at an atom centre
  double dose = 20000;             // electrons per frame
  uint64_t dead_pixels = 4;
  uint64_t seed = 1;
  DType dtype = DType::U16;
};

class StemSimulator {
 public:
  explicit StemSimulator(const StemSimulationParams& params);
  ~StemSimulator();

  // Renders frame `index` (row-major over the scan) as K × K pixels of params.dtype into out.
  void frame(uint64_t index, uint8_t* out) const;

  const StemSimulationParams& params() const { return p_; }
  double wavelength_A() const { return lambda_A_; }
  double real_pixel_A() const { return dx_A_; }
  double detector_mrad_per_px() const;
  std::vector<uint32_t> pixel_mask() const;       // K × K
  const std::vector<float>& object_phase() const { return phase_; }  // ground truth, object_rows × object_cols
  uint64_t object_rows() const { return object_rows_; }
  uint64_t object_cols() const { return object_cols_; }
  // The master-file metadata (detector, beam, the simulation's ground truth and parameters).
  DectrisMetadata metadata() const;

 private:
  struct Fft;
  StemSimulationParams p_;
  double lambda_A_ = 0, dx_A_ = 0, bf_radius_ = 0;
  uint64_t object_rows_ = 0, object_cols_ = 0;
  std::vector<float> phase_;           // object phase
  std::vector<float> probe_re_, probe_im_;  // real-space probe, K × K
  std::vector<uint32_t> dead_;         // dead pixel indices
  std::unique_ptr<Fft> fft_;
  std::vector<std::pair<uint64_t, uint64_t>> origins_;  // per scan position: the K × K window's corner
};

// Simulates and writes a whole acquisition with `threads` threads; returns the master path.
std::string write_simulated_acquisition(const StemSimulationParams& params, const DectrisWriterOptions& options, unsigned threads);

}  // namespace tmorph
