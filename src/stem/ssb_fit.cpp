// Aberration fit for SSB: TPE, then Nelder–Mead. Contract: ssb_fit.h.
#include "stem/ssb_fit.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "tensormorph/error.h"

namespace tmorph {

Aberrations ssb_canonical_aberrations(const Point& x, const SsbFitOptions& o) {
  double c10 = std::clamp(x.at(0), o.c10_low_nm, o.c10_high_nm), c12 = x.at(1), phi = x.at(2);
  if (c12 < 0) c12 = -c12, phi += 90;
  c12 = std::min(c12, o.c12_high_nm);
  phi = std::fmod(phi, 180.0);  // (−180, 180)
  if (phi <= -90) phi += 180;
  if (phi > 90) phi -= 180;
  Aberrations ab = o.fixed;
  ab.C10_A = c10 * 10, ab.C12_A = c12 * 10, ab.phi12_deg = phi;
  return ab;
}

SsbFit ssb_fit_aberrations(const SsbProblem& problem, double scan_rotation_deg, const SsbFitOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!(o.c10_low_nm < o.c10_high_nm) || !(o.c12_low_nm < o.c12_high_nm) || o.c12_low_nm < 0 ||
      !(o.phi12_low_deg < o.phi12_high_deg))
    throw Error(ErrorKind::InvalidArgument, "SSB fit: each search range needs low < high, and C12 >= 0");
  const std::vector<SearchDimension> box = {
      {"C10_nm", o.c10_low_nm, o.c10_high_nm}, {"C12_nm", o.c12_low_nm, o.c12_high_nm}, {"phi12_deg", o.phi12_low_deg, o.phi12_high_deg}};
  SsbFit fit;
  const auto loss = [&](const Point& x) {
    ++fit.evaluations;
    return problem.evaluate(ssb_canonical_aberrations(x, o), scan_rotation_deg, false).loss;
  };
  const std::vector<Trial> trials = tpe_search(box, loss, o.tpe);
  const Trial& best = trials[best_trial(trials)];
  fit.trials = static_cast<unsigned>(trials.size());
  fit.tpe_best = ssb_canonical_aberrations(best.x, o);
  fit.tpe_best_loss = best.loss;

  Point step(box.size());
  for (size_t d = 0; d < box.size(); ++d) step[d] = std::max(o.simplex.xatol, 0.01 * (box[d].high - box[d].low));
  const NelderMeadResult nm = nelder_mead(loss, best.x, step, o.simplex);
  // Nelder–Mead never returns a point worse than its start; keep the trial on a tie.
  const bool improved = nm.value < best.loss;
  fit.fitted = improved ? ssb_canonical_aberrations(nm.x, o) : fit.tpe_best;
  fit.loss = improved ? nm.value : best.loss;
  fit.simplex_iterations = nm.iterations, fit.simplex_evaluations = nm.evaluations, fit.simplex_converged = nm.converged;
  fit.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return fit;
}

}  // namespace tmorph
