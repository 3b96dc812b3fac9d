// Single-sideband (SSB) ptychography, preview: the object phase from a 4D-STEM acquisition with the probe's
// aberrations given (no fitting yet). Weak-phase-object theory (Rodenburg 1993; Pennycook et al. 2015).
//
// Conventions (every one is tested in tests/unit/ssb_test.cpp against StemSimulator):
// - Frames: I[R, k], R = (r, c) the scan position (row-major, frame r·Rc + c), k = (u, v) the detector pixel
//   (row, col) after any crop and bin. Bad pixels (SsbFrames::excluded_pixels) are never bright-field pixels.
// - Wavelength λ relativistic (electron_wavelength_A). Semi-angle α in rad = semiangle_mrad·1e-3.
// - Detector spatial frequency of pixel (u, v), in 1/Å, in the detector frame (row, col):
//   k = ((u − disk_row), (v − disk_col))·dk, dk = detector_mrad_per_px·1e-3 / λ.
// - Bright-field pixels b: the pixels with float32 distance to (disk_row, disk_col) ≤ disk_radius_px (the BF
//   preset of virtual_detector.h, both ends inclusive), minus excluded pixels.
// - Scan spatial frequency of DFT bin (i, j), in 1/Å along the scan's own axes:
//   ν_s = (fftfreq(Rr)[i], fftfreq(Rc)[j]) / scan_step_A (numpy's fftfreq).
// - Scan rotation θ = scan_rotation_deg: scan position (r, c) sits at X = R(θ)·(r, c)·step in the detector
//   (= object) frame, R(θ) = [[cos θ, −sin θ], [sin θ, cos θ]] acting on (row, col) — StemSimulator's
//   convention. An object Fourier component e^{2πi q·X} is then e^{2πi (R(θ)ᵀq)·(r, c)·step} over the scan,
//   so the scan frequency ν_s belongs to the detector-frame frequency ν = R(θ)·ν_s:
//   ν_row = cos θ·ν_s,row − sin θ·ν_s,col, ν_col = sin θ·ν_s,row + cos θ·ν_s,col.
// - Aberration function: χ(k) = (π/λ)·α²·[C10 + C12·cos 2(φ − φ12)] (+ the higher orders of Aberrations, Krivanek
//   notation: (2π/λ)·C_nm·α^(n+1)/(n+1)·cos(m(φ − φ_nm))), α = λ|k|, φ = atan2(k_row, k_col)
//   (the azimuth of k measured from the +column axis towards the +row axis), lengths in Å, φ12 in degrees.
//   Probe P(k) = A(k)·exp(−iχ(k)), A = 1 for |k| ≤ α/λ (inclusive), else 0. (StemSimulator: C10 = defocus_nm·10
//   with this same sign, and no C12.)
// - G_b(ν) = Σ_R (I[R, k_b] − Ī_b)·exp(−2πi ν_s·R·step) (unnormalised forward DFT over the scan, FFTW sign −1;
//   Ī_b = mean over the scan in float64). Computed in float32 by an in-place real-to-complex FFT per BF pixel,
//   stored as the Hermitian half plane Rr × (Rc/2 + 1) complex64; the mean is subtracted first only to keep
//   float32's dynamic range for the modulation (it changes nothing but the ν = 0 bin).
// - Weak phase object t = exp(iφ) ≈ 1 + iφ with spectrum δ + iΦ: G_b(ν) = N·Ī_b·iΦ(ν)·Γ_b(ν) for ν ≠ 0, with
//   the overlap Γ_b(ν) = P(k_b − ν)·P*(k_b) − P*(k_b + ν)·P(k_b) (|Γ| = 1 in a single-sideband region).
// - Half plane → full plane: the full Rr × Rc plane is rebuilt with G(−ν) = conj G(ν) before the correction
//   (Γ_b is not Hermitian, so O_b is complex and no complex-to-real transform applies).
// - Correction: C_b(ν) = G_b(ν)·Γ_b*(ν) / max(|Γ_b(ν)|, 1e-8) for ν ≠ 0; the DC term is set explicitly to
//   C_b(0) = N·Ī_b (real, positive; i.e. the raw intensity's G_b(0) with Γ := 1 at ν = 0): it is the
//   unscattered wave "1" of 1 + iφ, which puts the phase on its physical scale.
// - O_b = IFFT2(C_b) / N (numpy's ifft2 normalisation) ≈ Ī_b·(1 + iφ_b), φ_b the phase filtered to b's
//   sidebands; O = mean over b of O_b (float64 accumulation), so brighter pixels weigh more.
// - phase = arg O in (−π, π], positive where the object's phase is positive (an atom: positive phase);
//   amplitude = |O| / mean over b of Ī_b (≈ 1 for a weak phase object).
// - loss = mean over R of the population variance across b of arg O_b (plain, not circular, variance;
//   float64 sums of arg and arg² per position) — small when the aberrations are right.
// - Memory admission before anything is allocated: G (B × Rr × (Rc/2 + 1) × 8 bytes) + one batch of frames +
//   per reduction group (min(B, 16)) a full complex64 plane and float64 accumulators (Rr × Rc × 40 bytes) +
//   the ν and e^{iχ(ν)} tables, the per-pixel row and column factors + the float64 outputs.
//   Over budget: Error(PrecisionRefused) with the ladder (crop the scan, bin the detector, fewer BF pixels).
// - Evaluation: with χ quadratic (C10, C12) the phase difference across the overlap splits exactly:
//   χ(k ∓ ν) − χ(k) = χ(ν) ∓ 2·Bχ(k, ν), Bχ the symmetric bilinear form of χ, so
//   Γ_b(ν) = A(k_b)·e^{i·2Bχ(k_b, ν)}·[A(k_b − ν)·e^{−iχ(ν)} − A(k_b + ν)·e^{+iχ(ν)}], and 2Bχ(k_b, ν) is linear
//   in the scan frequency indices (i, j), so e^{i·2Bχ} is a row factor times a column factor: per BF pixel
//   Rr + Rc sincos and per ν one sincos per evaluation instead of two per (b, ν). Same Γ to float64 rounding.
//   With higher orders, Γ is computed directly from P(k_b ∓ ν) at every (b, ν) (slower, same contract).
// - Results do not depend on the thread count at all (fixed reduction groups; SsbProblem).
// - Backends: the correction, inverse FFT and reduction over b is the op stem.ssb_overlap
//   (op_contracts.h), placed by the planner: the CPU kernel (FFTW) is the reference; a Vulkan kernel runs
//   the quadratic variant (the higher orders fall back to the CPU, reported in the placement). Each
//   backend is deterministic; they agree within phase 2e-4 rad and loss 1e-5 relative (parity tests).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "stem/load.h"
#include "tensormorph/placement.h"
#include "tensormorph/planner.h"
#include "tensormorph/dtype.h"

namespace tmorph {

struct SsbCalibration {
  double energy_ev = 0;             // accelerating voltage × e
  double semiangle_mrad = 0;        // probe convergence semi-angle α
  double scan_step_A = 0;           // scan step (both axes)
  double detector_mrad_per_px = 0;  // detector angle per pixel (after any bin)
  double scan_rotation_deg = 0;     // see the convention above
  double disk_row = 0, disk_col = 0, disk_radius_px = 0;  // bright-field disk, detector pixels
};

// Higher orders in Krivanek notation: χ gains (2π/λ)·C_nm·α^(n+1)/(n+1)·cos(m(φ − φ_nm)) per term (C10 and C12
// above are the n = 1 terms of the same sum). Index i of `higher` is kHigherOrderNames[i].
inline constexpr int kHigherOrders = 12;
inline constexpr const char* kHigherOrderNames[kHigherOrders] = {"C21", "C23", "C30", "C32", "C34", "C41",
                                                                 "C43", "C45", "C50", "C52", "C54", "C56"};

struct Aberrations {
  double C10_A = 0;      // defocus (χ = (π/λ)·α²·C10; positive as StemSimulator's defocus_nm·10)
  double C12_A = 0;      // two-fold astigmatism magnitude
  double phi12_deg = 0;  // its azimuth, from +column towards +row
  double higher_A[kHigherOrders] = {};    // C21 … C56 in Å (C30 = Cs); all zero: χ is quadratic
  double higher_deg[kHigherOrders] = {};  // their azimuths φ_nm (ignored for m = 0)
};

// True when every higher-order coefficient is zero (the fast separable evaluation applies).
bool ssb_quadratic(const Aberrations& ab);

struct SsbResult {
  uint64_t rows = 0, cols = 0;    // the scan
  std::vector<double> phase;      // arg O, rows × cols, radians (empty when not asked for)
  std::vector<double> amplitude;  // |O| / mean Ī_b
  double loss = 0;                // mean over R of var_b arg O_b
  uint64_t bf_pixels = 0;         // B
  uint64_t memory_bytes = 0;      // what the admission counted
  double seconds = 0;
  Placement placement;            // where stem.ssb_overlap ran (the per-pixel work), and why
};

// Frames as products.cpp streams them: fill(first, count, out) writes scan positions [first, first + count)
// (row-major) as count × det_rows × det_cols pixels of `dtype` (U8, U16, U32, U64, F32 or F64) into out.
struct SsbFrames {
  DType dtype = DType::U16;
  std::function<void(uint64_t first, uint64_t count, uint8_t* out)> fill;
  std::vector<uint32_t> excluded_pixels;       // e.g. dead pixels: never used as bright-field pixels
  // Frames per fill call (counted by the memory admission). Small enough that the one batch buffer, reused
  // for every call, stays cheap to fault in (fresh pages are zeroed by the kernel at first touch).
  uint64_t batch_bytes = uint64_t{8} << 20;
  // When set, used instead of fill (frames read elsewhere, e.g. on other MPI ranks: distributed_ssb.h): writes
  // the values of `pixels` (the bright-field pixels, ssb_bright_field_pixels) at positions [first, first + count)
  // as count × pixels.size() float32, position-major, exactly as ssb_extract_bright_field makes them from the
  // frames. Called in position order with the batches fill would get (the admission counts one frame batch).
  std::function<void(uint64_t first, uint64_t count, const std::vector<uint32_t>& pixels, float* out)> fill_bright_field;
};

// What SSB keeps of `count` frames of `frame_pixels` pixels of `dtype` (SsbFrames' dtypes): the values of
// `pixels`, each converted to float32 (round to nearest), as count × pixels.size() floats, position-major.
void ssb_extract_bright_field(const uint8_t* frames, DType dtype, uint64_t count, uint64_t frame_pixels,
                              const std::vector<uint32_t>& pixels, float* out);

// The loader's frames (bad pixels already zeroed by the load contract; pass their indices in
// excluded_pixels if they fall inside the disk). The loader must outlive the call.
SsbFrames ssb_frames_from_loader(StemLoader& loader);
// A resident 4-D array from load_stem (its memory is not counted again by the admission).
SsbFrames ssb_frames_from_array(const StemArray& array);

// χ(k) in radians for a detector-frame spatial frequency (k_row, k_col) in 1/Å (convention above).
double ssb_chi(double k_row, double k_col, double wavelength_A, const Aberrations& ab);

// The bright-field pixels (sorted, row-major indices) that ssb_reconstruct uses.
std::vector<uint32_t> ssb_bright_field_pixels(uint64_t det_rows, uint64_t det_cols, const SsbCalibration& cal,
                                              const std::vector<uint32_t>& excluded);

// The part of SSB that does not depend on the aberrations or the scan rotation, built once: the frames are
// streamed a single time into G (B × Rr × (Rc/2 + 1) complex64) and the per-pixel means. evaluate() then
// corrects and reduces for any aberrations and rotation (what a fit calls hundreds of times).
//
// Determinism: on the CPU the bright-field pixels are reduced in a fixed number of groups (min(B, 16),
// contiguous in pixel order, each summed in pixel order) that does not depend on the thread count, and the
// groups are added in group order, so evaluate() returns bit-identical phase and loss for any `threads`
// (Vulkan sums the pixels in order: deterministic too, within the parity bound of the CPU).
//
// Throws as ssb_reconstruct (calibration, shape, PrecisionRefused over budget). cal.scan_rotation_deg is
// not used here: evaluate() takes the rotation. The problem keeps `threads` for evaluate().
class SsbProblem {
 public:
  // `planner` places stem.ssb_overlap (op_contracts.h) once per variant; the backends it places on must
  // outlive the problem (the planner itself need not).
  SsbProblem(const SsbFrames& frames, uint64_t scan_rows, uint64_t scan_cols, uint64_t det_rows, uint64_t det_cols,
             const SsbCalibration& cal, unsigned threads, uint64_t memory_budget_bytes, const Planner& planner);
  ~SsbProblem();
  SsbProblem(const SsbProblem&) = delete;
  SsbProblem& operator=(const SsbProblem&) = delete;

  // The reconstruction for these aberrations and scan rotation (degrees). with_images = false skips the
  // phase and amplitude (the loss alone, as a fit needs). Thread-safe for concurrent callers (serialised).
  SsbResult evaluate(const Aberrations& ab, double scan_rotation_deg, bool with_images = true) const;

  uint64_t bf_pixels() const;
  uint64_t memory_bytes() const;

  // Read-only view of what the problem holds, for estimators that work on the same spectra (ssb_parallax.h).
  // Valid while the problem lives. spectrum(b) is G_b: the half plane rows × (cols/2 + 1) complex64,
  // row-major, of the mean-subtracted intensities of bright-field pixel b (FFTW r2c layout, sign −1).
  struct View {
    uint64_t rows = 0, cols = 0, det_cols = 0;
    const std::vector<uint32_t>* pixels = nullptr;  // the bright-field pixels, row-major detector indices
    const std::vector<double>* means = nullptr;     // Ī_b
    SsbCalibration calibration;                     // as given (its scan rotation unused)
    double wavelength_A = 0, dk_per_px = 0;         // λ; detector spatial frequency per pixel, 1/Å
    unsigned threads = 1;
    const float* spectra = nullptr;                 // interleaved (re, im) float pairs
    uint64_t stride = 0;                            // complex elements between consecutive pixels' spectra
    const float* spectrum(uint64_t b) const { return spectra + 2 * b * stride; }
  };
  View view() const;
  double prepare_seconds() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Reconstructs (SsbProblem(...).evaluate(ab, cal.scan_rotation_deg)). threads >= 1; memory_budget_bytes
// 0 = no limit. Throws Error(InvalidArgument) for a bad calibration or shape (non-positive energy,
// semi-angle, step or pixel size; a disk not inside the detector; no bright-field pixel; a scan smaller
// than 2 × 2) and Error(PrecisionRefused) over budget.
SsbResult ssb_reconstruct(const SsbFrames& frames, uint64_t scan_rows, uint64_t scan_cols, uint64_t det_rows,
                          uint64_t det_cols, const SsbCalibration& cal, const Aberrations& ab, unsigned threads,
                          uint64_t memory_budget_bytes, const Planner& planner);

}  // namespace tmorph
