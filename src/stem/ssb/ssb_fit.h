// Fitting the probe's aberrations (C10, C12, φ12) for SSB by minimising the SSB loss (ssb.h): a direct parallax
// estimate (ssb_parallax.h), a seeded Tree-structured Parzen Estimator search (optimize/tpe.h) in a box around it,
// then Nelder–Mead (optimize/nelder_mead.h); and the choice between the two conjugate branches by physics.
//
// Contract:
// - Coordinates: C10 and C12 in nm, φ12 in degrees (the units of xatol). The limits (default C10 ∈ [−400, 400] nm,
//   C12 ∈ [0, 100] nm, φ12 ∈ [−90, 90]°) bound every evaluated point: C10 clamped to them; a negative C12 is the
//   same astigmatism as |C12| at φ12 + 90°; φ12 wrapped into (−90, 90] (χ has period 180° in φ12); C12 capped at
//   the top. Results are reported in this canonical form.
// - Search SsbSearch::Estimate (the default): the parallax estimate at the rotation given. When it is reliable,
//   TPE samples `estimate_trials` points in the box centred on it, half-widths C10: max(4σ, 0.2·|C10|, 2 nm);
//   C12: max(4σ, 0.3·C12, 2 nm) (from max(0, ·)); φ12: max(4σ, 15°) when C12 − its half-width > 0, else all
//   of (−90, 90] — each clipped to the limits; the estimate itself is evaluated too. When it is not reliable (or
//   the scan is too small for it), the wide search runs instead and `search` says why.
//   SsbSearch::Wide: TPE samples the whole limits box with tpe.trials (200) trials (the estimate, when it can be
//   made, is still reported).
// - Nelder–Mead starts at the better of the best trial and the estimate, with steps of 1% of each box range (at
//   least xatol); the fit keeps the start on a tie.
// - Deterministic: the same problem, rotation, options and seed give byte-identical fitted parameters on every
//   run and for every thread count.
//
// Branches: with θ + 180° the scan is point-reflected, and every aberration whose χ is even in k (C10, C12, C30,
// C32, C34, C50 …: n odd) negated gives exactly the negated overlap Γ, hence the same loss and the negated phase
// (the conjugate branch; the loss cannot tell them apart). ssb_decide_branch decides between (ab, θ) and
// (conjugate(ab), θ + 180°) by physics: a weak phase object of atoms has a positive projected potential, so its
// phase is mostly near zero with positive peaks — positive skewness. With the rotation from DPC (known mod 180°)
// the branch whose phase has the larger skewness wins; with a rotation given by the caller the given rotation
// fixes the branch and the skewness is reported as a check (`consistent`).
#pragma once

#include <atomic>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "optimize/nelder_mead.h"
#include "optimize/tpe.h"
#include "stem/ssb/ssb.h"
#include "stem/ssb/ssb_parallax.h"

namespace tmorph {

enum class SsbSearch { Estimate, Wide };

// Where a fit is, after each loss evaluation (SsbFitOptions::progress).
struct SsbFitProgress {
  const char* stage = "search";   // "search" (the TPE trials, `stage_planned` of them) or "simplex" (open-ended)
  unsigned evaluations = 0;       // loss evaluations of the whole fit so far
  unsigned stage_evaluations = 0;
  unsigned stage_planned = 0;     // 0 when open-ended
  double best_loss = 0;           // the lowest loss evaluated so far
  double seconds = 0;             // since the fit began
};

struct SsbFitOptions {
  double c10_low_nm = -400, c10_high_nm = 400;
  double c12_low_nm = 0, c12_high_nm = 100;
  double phi12_low_deg = -90, phi12_high_deg = 90;
  SsbSearch search = SsbSearch::Estimate;
  unsigned estimate_trials = 40;  // TPE trials around a reliable estimate
  Aberrations fixed;              // its higher orders (C21 … C56) are held fixed during the fit; C10/C12/φ12 unused
  TpeOptions tpe;                 // the wide search: trials 200, seed 0 by default (the seed serves both searches)
  NelderMeadOptions simplex;      // α 1, γ 2, ρ 0.5, σ 0.5, xatol 0.1, fatol 1e-8, ≤ 300 iterations
  const std::atomic<bool>* cancel = nullptr;  // checked before each loss evaluation (support/cancel.h)
  // Called after each loss evaluation on the fitting thread (not part of the fit's inputs or its report).
  std::function<void(const SsbFitProgress&)> progress;
};

struct SsbSearchBox {
  double c10_nm[2] = {}, c12_nm[2] = {}, phi12_deg[2] = {};
};

struct SsbFit {
  Aberrations fitted;           // canonical, Å and degrees
  double loss = 0;              // at `fitted`
  std::optional<ParallaxEstimate> estimate;
  std::optional<double> estimate_loss;  // the loss at the estimate (when it was searched around)
  std::string estimate_error;   // why there is no estimate (too small a scan), else empty
  std::string search;           // "around the estimate", "wide (asked)", "wide (fallback: …)"
  SsbSearchBox box;             // what TPE sampled
  Aberrations tpe_best;         // the best trial (canonical)
  double tpe_best_loss = 0;
  unsigned trials = 0;
  unsigned simplex_iterations = 0, simplex_evaluations = 0;
  bool simplex_converged = false;
  unsigned evaluations = 0;     // all loss evaluations
  double estimate_seconds = 0, tpe_seconds = 0, simplex_seconds = 0;
  double seconds = 0;
};

// The canonical aberrations of a search point (C10 nm, C12 nm, φ12 deg), in Å and degrees, with the fixed
// higher orders of options.fixed.
Aberrations ssb_canonical_aberrations(const Point& x, const SsbFitOptions& options);

// Throws InvalidArgument for an empty or inverted box (low >= high, C12 bounds outside [0, ∞)).
SsbFit ssb_fit_aberrations(const SsbProblem& problem, double scan_rotation_deg, const SsbFitOptions& options);

// The conjugate branch's aberrations: those even in k (n odd) negated, canonical (−C12 at φ12 = C12 at φ12 + 90°).
Aberrations ssb_conjugate(const Aberrations& ab);

// Population skewness of a phase image (0 when it is constant).
double phase_skewness(const std::vector<double>& phase);

struct SsbBranch {
  Aberrations aberrations;      // the chosen branch's
  double rotation_deg = 0;      // and its scan rotation
  bool conjugate = false;       // the conjugate of the fitted branch was chosen
  bool rotation_given = false;  // the caller's rotation fixed the branch
  double loss[2] = {};          // [fitted at θ, conjugate at θ + 180°]
  double skewness[2] = {};
  bool consistent = true;       // the chosen branch's skewness is >= 0
  SsbResult images;             // the chosen branch's reconstruction
};

// Decides per the contract above; evaluates both branches with images (two evaluations).
SsbBranch ssb_decide_branch(const SsbProblem& problem, const Aberrations& fitted, double scan_rotation_deg, bool rotation_given);

// {"criterion", "decided_by", "chosen", "candidates": [{"rotation_deg", "aberrations", "loss", "skewness"} × 2],
//  "consistent"}.
nlohmann::json to_json(const SsbBranch& branch);

// The fit block's parts that do not depend on the run: estimate, search, box, stages, evaluations.
nlohmann::json to_json(const SsbFit& fit, const SsbFitOptions& options);

}  // namespace tmorph
