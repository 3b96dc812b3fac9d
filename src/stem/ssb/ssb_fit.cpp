// Aberration fit for SSB: parallax estimate, TPE around it (or wide), Nelder–Mead; the branch by physics.
// Contract: ssb_fit.h.
#include "stem/ssb/ssb_fit.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <cmath>

#include "core/json_number.h"
#include "stem/ssb/ssb_setup.h"
#include "support/cancel.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The TPE box around a reliable estimate, clipped to the limits (contract: ssb_fit.h).
SsbSearchBox box_around(const ParallaxEstimate& e, const SsbFitOptions& o) {
  SsbSearchBox b;
  const double c10 = e.aberrations.C10_A / 10, c12 = e.aberrations.C12_A / 10, phi = e.aberrations.phi12_deg;
  const double w10 = std::max({4 * e.c10_sigma_A / 10, 0.2 * std::abs(c10), 2.0});
  const double w12 = std::max({4 * e.c12_sigma_A / 10, 0.3 * c12, 2.0});
  b.c10_nm[0] = std::max(o.c10_low_nm, c10 - w10), b.c10_nm[1] = std::min(o.c10_high_nm, c10 + w10);
  b.c12_nm[0] = std::max(o.c12_low_nm, c12 - w12), b.c12_nm[1] = std::min(o.c12_high_nm, c12 + w12);
  if (c12 - w12 > 0) {
    const double wphi = std::min(90.0, std::max(4 * e.phi12_sigma_deg, 15.0));
    b.phi12_deg[0] = phi - wphi, b.phi12_deg[1] = phi + wphi;  // may cross ±90°: canonical form wraps
  } else {
    b.phi12_deg[0] = o.phi12_low_deg, b.phi12_deg[1] = o.phi12_high_deg;
  }
  // An estimate outside the limits leaves an empty interval: fall back to the limits on that axis.
  if (!(b.c10_nm[0] < b.c10_nm[1])) b.c10_nm[0] = o.c10_low_nm, b.c10_nm[1] = o.c10_high_nm;
  if (!(b.c12_nm[0] < b.c12_nm[1])) b.c12_nm[0] = o.c12_low_nm, b.c12_nm[1] = o.c12_high_nm;
  return b;
}

SsbSearchBox limits_box(const SsbFitOptions& o) {
  SsbSearchBox b;
  b.c10_nm[0] = o.c10_low_nm, b.c10_nm[1] = o.c10_high_nm;
  b.c12_nm[0] = o.c12_low_nm, b.c12_nm[1] = o.c12_high_nm;
  b.phi12_deg[0] = o.phi12_low_deg, b.phi12_deg[1] = o.phi12_high_deg;
  return b;
}

}  // namespace

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
  SsbFit fit;
  SsbFitProgress at;  // what o.progress is told
  at.best_loss = std::numeric_limits<double>::infinity();
  const auto loss = [&](const Point& x) {
    check_cancel(o.cancel);
    ++fit.evaluations;
    const double value = problem.evaluate(ssb_canonical_aberrations(x, o), scan_rotation_deg, false).loss;
    if (o.progress) {
      at.evaluations = fit.evaluations, ++at.stage_evaluations;
      at.best_loss = std::min(at.best_loss, value);
      at.seconds = since(t0);
      o.progress(at);
    }
    return value;
  };

  // The direct estimate (reported in every mode when the scan allows it).
  try {
    fit.estimate = ssb_parallax_estimate(problem, scan_rotation_deg);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::InvalidArgument) throw;
    fit.estimate_error = e.what();
  }
  fit.estimate_seconds = since(t0);
  const bool around = o.search == SsbSearch::Estimate && fit.estimate && fit.estimate->reliable;
  if (around) fit.search = "around the estimate";
  else if (o.search == SsbSearch::Wide) fit.search = "wide (asked)";
  else fit.search = "wide (fallback: " + (fit.estimate ? "the estimate is unreliable: " + fit.estimate->reason : fit.estimate_error) + ")";
  fit.box = around ? box_around(*fit.estimate, o) : limits_box(o);

  const auto t_tpe = std::chrono::steady_clock::now();
  TpeOptions tpe = o.tpe;
  if (around) tpe.trials = o.estimate_trials;
  at.stage_planned = tpe.trials + (around ? 1 : 0);  // the trials, and the loss at the estimate
  const std::vector<SearchDimension> box = {{"C10_nm", fit.box.c10_nm[0], fit.box.c10_nm[1]},
                                            {"C12_nm", fit.box.c12_nm[0], fit.box.c12_nm[1]},
                                            {"phi12_deg", fit.box.phi12_deg[0], fit.box.phi12_deg[1]}};
  const std::vector<Trial> trials = tpe_search(box, loss, tpe);
  const Trial& best = trials[best_trial(trials)];
  fit.trials = static_cast<unsigned>(trials.size());
  fit.tpe_best = ssb_canonical_aberrations(best.x, o);
  fit.tpe_best_loss = best.loss;
  Point start = best.x;
  double start_loss = best.loss;
  if (around) {
    const Aberrations& e = fit.estimate->aberrations;
    const Point x = {e.C10_A / 10, e.C12_A / 10, e.phi12_deg};
    fit.estimate_loss = loss(x);
    if (*fit.estimate_loss < start_loss) start = x, start_loss = *fit.estimate_loss;
  }
  fit.tpe_seconds = since(t_tpe);

  const auto t_nm = std::chrono::steady_clock::now();
  at.stage = "simplex", at.stage_evaluations = 0, at.stage_planned = 0;
  Point step(box.size());
  for (size_t d = 0; d < box.size(); ++d) step[d] = std::max(o.simplex.xatol, 0.01 * (box[d].high - box[d].low));
  const NelderMeadResult nm = nelder_mead(loss, start, step, o.simplex);
  const bool improved = nm.value < start_loss;
  fit.fitted = ssb_canonical_aberrations(improved ? nm.x : start, o);
  fit.loss = improved ? nm.value : start_loss;
  fit.simplex_iterations = nm.iterations, fit.simplex_evaluations = nm.evaluations, fit.simplex_converged = nm.converged;
  fit.simplex_seconds = since(t_nm);
  fit.seconds = since(t0);
  return fit;
}

Aberrations ssb_conjugate(const Aberrations& ab) {
  Aberrations c = ab;
  c.C10_A = -ab.C10_A;
  c.phi12_deg = ab.phi12_deg + 90;  // −C12 at φ12 is C12 at φ12 + 90°
  if (c.phi12_deg > 90) c.phi12_deg -= 180;
  if (ab.C12_A == 0) c.phi12_deg = ab.phi12_deg;
  for (int i = 0; i < kHigherOrders; ++i)
    if ((kHigherOrderNames[i][1] - '0') % 2 == 1) c.higher_A[i] = -ab.higher_A[i];  // even in k: negated
  return c;
}

double phase_skewness(const std::vector<double>& phase) {
  if (phase.empty()) return 0;
  const auto n = static_cast<double>(phase.size());
  double mean = 0;
  for (double x : phase) mean += x;
  mean /= n;
  double m2 = 0, m3 = 0;
  for (double x : phase) {
    const double d = x - mean;
    m2 += d * d, m3 += d * d * d;
  }
  m2 /= n, m3 /= n;
  return m2 > 0 ? m3 / std::pow(m2, 1.5) : 0;
}

SsbBranch ssb_decide_branch(const SsbProblem& problem, const Aberrations& fitted, double scan_rotation_deg, bool rotation_given) {
  SsbBranch b;
  b.rotation_given = rotation_given;
  const Aberrations conj = ssb_conjugate(fitted);
  const double conj_rotation = std::fmod(scan_rotation_deg + 180, 360.0);
  SsbResult as_fitted = problem.evaluate(fitted, scan_rotation_deg);
  SsbResult conjugate = problem.evaluate(conj, conj_rotation);
  b.loss[0] = as_fitted.loss, b.loss[1] = conjugate.loss;
  b.skewness[0] = phase_skewness(as_fitted.phase), b.skewness[1] = phase_skewness(conjugate.phase);
  b.conjugate = !rotation_given && b.skewness[1] > b.skewness[0];
  b.aberrations = b.conjugate ? conj : fitted;
  b.rotation_deg = b.conjugate ? conj_rotation : scan_rotation_deg;
  b.consistent = b.skewness[b.conjugate ? 1 : 0] >= 0;
  b.images = std::move(b.conjugate ? conjugate : as_fitted);
  return b;
}

nlohmann::json to_json(const SsbBranch& b) {
  const Aberrations fitted = b.conjugate ? ssb_conjugate(b.aberrations) : b.aberrations;  // an involution
  const double fitted_rotation = b.conjugate ? std::fmod(b.rotation_deg + 180, 360.0) : b.rotation_deg;
  nlohmann::json candidates = nlohmann::json::array();
  candidates.push_back({{"branch", "as fitted"}, {"rotation_deg", fitted_rotation}, {"aberrations", to_json(fitted)},
                        {"loss", json_number(b.loss[0])}, {"skewness", json_number(b.skewness[0])}});
  candidates.push_back({{"branch", "conjugate"}, {"rotation_deg", std::fmod(fitted_rotation + 180, 360.0)},
                        {"aberrations", to_json(ssb_conjugate(fitted))}, {"loss", json_number(b.loss[1])},
                        {"skewness", json_number(b.skewness[1])}});
  return {{"criterion", "skewness of the phase: a weak phase object of atoms has positive phase peaks on a near-zero "
                        "background, so the physical branch's phase has positive skewness"},
          {"decided_by", b.rotation_given ? "the given scan rotation (skewness reported as a check)"
                                          : "the larger skewness (the rotation from DPC is known only mod 180 degrees)"},
          {"chosen", b.conjugate ? "conjugate" : "as fitted"},
          {"candidates", candidates},
          {"consistent", b.consistent}};
}

nlohmann::json to_json(const SsbFit& f, const SsbFitOptions& o) {
  nlohmann::json estimate = nullptr;
  if (f.estimate) {
    const ParallaxEstimate& e = *f.estimate;
    estimate = {{"method", "parallax: cross-correlation of bright-field images of neighbouring detector pixels, "
                           "least squares over detector offsets 1.." + std::to_string(e.offsets)},
                {"aberrations", to_json(e.aberrations)},
                {"sigma", {{"C10", e.c10_sigma_A}, {"C12", e.c12_sigma_A}, {"phi12", e.phi12_sigma_deg}}},
                {"loss", f.estimate_loss ? json_number(*f.estimate_loss) : nlohmann::json(nullptr)},
                {"reliable", e.reliable},
                {"reason", e.reason},
                {"implied_scan_rotation_deg_mod_180", e.implied_rotation_deg},
                {"rotation_asymmetry", e.asymmetry},
                {"shift_per_detector_px", {{e.shift_per_px[0][0], e.shift_per_px[0][1]}, {e.shift_per_px[1][0], e.shift_per_px[1][1]}}},
                {"max_shift_scan_px", e.max_shift_px},
                {"peak_contrast", e.peak_contrast},
                {"pixel_pairs", e.pairs},
                {"seconds", e.seconds}};
  } else {
    estimate = {{"method", "parallax"}, {"reliable", false}, {"reason", f.estimate_error}};
  }
  return {{"estimate", estimate},
          {"search", f.search},
          {"search_box", {{"C10_nm", {f.box.c10_nm[0], f.box.c10_nm[1]}},
                          {"C12_nm", {f.box.c12_nm[0], f.box.c12_nm[1]}},
                          {"phi12_deg", {f.box.phi12_deg[0], f.box.phi12_deg[1]}}}},
          {"limits", {{"C10_nm", {o.c10_low_nm, o.c10_high_nm}},
                      {"C12_nm", {o.c12_low_nm, o.c12_high_nm}},
                      {"phi12_deg", {o.phi12_low_deg, o.phi12_high_deg}}}},
          {"trials", f.trials},
          {"seed", o.tpe.seed},
          {"tpe_best", to_json(f.tpe_best)},
          {"tpe_best_loss", json_number(f.tpe_best_loss)},
          {"nelder_mead", {{"iterations", f.simplex_iterations}, {"evaluations", f.simplex_evaluations},
                           {"converged", f.simplex_converged}, {"loss", json_number(f.loss)}}},
          {"stages", {{"estimate", {{"loss", f.estimate_loss ? json_number(*f.estimate_loss) : nlohmann::json(nullptr)},
                                    {"seconds", f.estimate_seconds}}},
                      {"tpe", {{"best_loss", json_number(f.tpe_best_loss)}, {"trials", f.trials}, {"seconds", f.tpe_seconds}}},
                      {"nelder_mead", {{"loss", json_number(f.loss)}, {"evaluations", f.simplex_evaluations},
                                       {"seconds", f.simplex_seconds}}}}},
          {"evaluations", f.evaluations},
          {"seconds", f.seconds}};
}

}  // namespace tmorph
