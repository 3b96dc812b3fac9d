// A direct estimate of the probe's defocus and two-fold astigmatism (C10, C12, φ12) from the parallax of the
// bright-field images (tilt-corrected bright field), before any SSB search: one pass over G, no SSB evaluation.
//
// Physics (conventions of ssb.h): for a weak phase object, the image of bright-field pixel k_b is the image shared
// by all pixels, shifted by s_b = −∇χ(k_b)/(2π) in the detector frame (Å). With χ quadratic,
// ∇χ(k) = 2πλ·M·k, M = [[C10 − C12·cos 2φ12, C12·sin 2φ12], [C12·sin 2φ12, C10 + C12·cos 2φ12]] (row, col), so the
// shift is linear in k. In scan pixels (scan position p sits at R(θ)·p·step) it is t_b = R(θ)ᵀ·s_b / step, so a
// step of one detector pixel along axis x moves the image by A·e_x scan pixels with
//   A = −(λ·dk / step)·R(θ)ᵀ·M          (dk: detector spatial frequency per pixel, 1/Å).
//
// Method (pairwise, so that a large defocus — which washes out the mean bright-field image — is measured as well
// as a small one):
// - Each bright-field image (G_b transformed back, a Hann window applied, transformed again: W_b).
// - For a detector offset of m pixels along the row or the column axis, the cross-power spectrum summed over every
//   pair of bright-field pixels (b, b + offset): C(ν) = Σ_b W_b(ν)·conj(W_{b+offset}(ν)); since the shift is
//   linear in k, every pair has the same relative shift, so the sum is one sharp correlation peak at −m·A·e_x.
// - The peak: of the correlation's local maxima within 70 % of its maximum (for m = 1 within a quarter of the scan;
//   for m > 1 within 2 pixels of m times the m = 1 shift), the one nearest the search centre — a crystal's
//   correlation peaks at every lattice vector too, nearly as high when the scan spans many cells, and the
//   true shift is taken to be the smallest: the estimate aliases when the shift per detector pixel exceeds half
//   the specimen's period (for a 2.5 Å lattice at 300 kV, 20 mrad, 1.67 mrad/px, 0.37 Å step: |C10| ≳ 75 nm),
//   and the search around it then misses (the wide search is the option for such defocus) — refined to 0.01 scan pixel by evaluating the correlation's Fourier
//   series on two finer grids.
// - m = 1 … M per axis, M chosen so that the largest shift stays near 3 scan pixels (well inside the lattice
//   period of a crystal) and the pixel pairs stay plentiful (m ≤ half the disk radius); A's columns by least
//   squares through the origin, their standard errors from the residuals (floor 0.01 pixel / Σm).
// - M = −(step / (λ·dk))·R(θ)·A; C10 = trace / 2, C12 and φ12 from the symmetric part's traceless half. The
//   antisymmetric part, relative to the whole, measures how well the scan rotation θ fits the shifts
//   (`asymmetry`); the rotation that makes R(θ)·A symmetric is reported (mod 180°) as a check of θ.
// - The 180° ambiguity: θ + 180° gives −M, i.e. all aberrations negated — the conjugate branch. The estimate
//   is for the θ given; ssb_fit.h decides the branch.
// - Noise: each offset is also measured on the even- and the odd-numbered pairs apart; half their difference is
//   the full set's standard error. The standard errors of A are the larger of that and the residuals' across m.
// - Reliable when the standard errors are small (C10's ≤ max(0.25·|C10|, 30 Å), C12's ≤ max(0.25·C12, 30 Å))
//   and the shift per detector pixel is more than a pixel inside the m = 1 search window (a quarter of the scan);
//   otherwise `reason` says which failed. (The shift across the whole disk may exceed the window: only
//   neighbours' shifts are measured.)
//   (The peak's contrast over the correlation's standard deviation is reported but not used: a crystal's
//   correlation has a peak at every lattice vector, so it stays near 5 whatever the dose.)
// - Deterministic and independent of the thread count (sums in fixed order per frequency).
#pragma once

#include <cstdint>
#include <string>

#include "stem/ssb/ssb.h"

namespace tmorph {

struct ParallaxEstimate {
  Aberrations aberrations;             // C10, C12 (Å), φ12 (degrees, canonical (−90, 90]) at the rotation given
  double c10_sigma_A = 0, c12_sigma_A = 0, phi12_sigma_deg = 0;  // standard errors from the residuals
  double shift_per_px[2][2] = {};      // A: [scan row, scan col][detector row, col], scan pixels per detector pixel
  double implied_rotation_deg = 0;     // mod 180°, in [0, 180)
  double asymmetry = 0;                // |antisymmetric part| / |M| at the rotation given (0: consistent)
  unsigned offsets = 0;                // M: offsets per axis
  uint64_t pairs = 0;                  // bright-field pixel pairs summed, all offsets
  double peak_contrast = 0;            // the weakest peak's (peak − mean) / standard deviation (reported only)
  double max_shift_px = 0;             // the largest image shift across the disk, scan pixels (reported)
  bool reliable = false;
  std::string reason;                  // why not reliable (empty when reliable)
  double seconds = 0;
};

// Throws Error(InvalidArgument) when the scan is smaller than 8 × 8 or the disk has no pixel pair at offset 1.
ParallaxEstimate ssb_parallax_estimate(const SsbProblem& problem, double scan_rotation_deg);

}  // namespace tmorph
