// Fitting the probe's aberrations (C10, C12, φ12) for SSB by minimising the SSB loss (ssb.h): a seeded
// Tree-structured Parzen Estimator search (optimize/tpe.h) over the box, then Nelder–Mead
// (optimize/nelder_mead.h) from the best trial.
//
// Contract:
// - Search coordinates: C10 and C12 in nm, φ12 in degrees (the units of xatol); the box defaults to
//   C10 ∈ [−400, 400] nm, C12 ∈ [0, 100] nm, φ12 ∈ [−90, 90]°.
// - Nelder–Mead starts at the best trial with steps of 1% of each range (at least xatol) and sees raw
//   coordinates; every point is evaluated at its canonical form: C10 clamped to the box; a negative C12 is
//   the same astigmatism as |C12| at φ12 + 90°; φ12 wrapped into (−90, 90] (χ has period 180° in φ12); C12
//   clamped to the box's top. The result is reported in canonical form.
// - Deterministic: the same problem, rotation, options and seed give byte-identical fitted parameters on every
//   run and for every thread count (SsbProblem::evaluate is thread-count independent; the optimisers are
//   deterministic).
#pragma once

#include <cstdint>

#include "optimize/nelder_mead.h"
#include "optimize/tpe.h"
#include "stem/ssb.h"

namespace tmorph {

struct SsbFitOptions {
  double c10_low_nm = -400, c10_high_nm = 400;
  double c12_low_nm = 0, c12_high_nm = 100;
  double phi12_low_deg = -90, phi12_high_deg = 90;
  Aberrations fixed;            // its higher orders (C21 … C56) are held fixed during the fit; C10/C12/φ12 unused
  TpeOptions tpe;               // trials 200, seed 0 by default
  NelderMeadOptions simplex;    // α 1, γ 2, ρ 0.5, σ 0.5, xatol 0.1, fatol 1e-8, ≤ 300 iterations
};

struct SsbFit {
  Aberrations fitted;           // canonical, Å and degrees
  double loss = 0;              // at `fitted`
  Aberrations tpe_best;         // the best trial (canonical)
  double tpe_best_loss = 0;
  unsigned trials = 0;
  unsigned simplex_iterations = 0, simplex_evaluations = 0;
  bool simplex_converged = false;
  unsigned evaluations = 0;     // all loss evaluations
  double seconds = 0;
};

// The canonical aberrations of a search point (C10 nm, C12 nm, φ12 deg), in Å and degrees, with the fixed
// higher orders of options.fixed.
Aberrations ssb_canonical_aberrations(const Point& x, const SsbFitOptions& options);

// Throws InvalidArgument for an empty or inverted box (low >= high, C12 bounds outside [0, ∞)).
SsbFit ssb_fit_aberrations(const SsbProblem& problem, double scan_rotation_deg, const SsbFitOptions& options);

}  // namespace tmorph
