// Tree-structured Parzen Estimator search (Bergstra et al., NeurIPS 2011), univariate, minimising.
//
// Contract:
// - The first `startup_trials` points are uniform in the box; every later point is the best of
//   `candidates` draws from l(x) by the ratio l(x)/g(x), where the trials so far, ordered by (loss, trial
//   index), are split into the best n_good = min(ceil(gamma·n), max_good) ("good", l) and the rest (g).
// - l and g are, per dimension, mixtures of Gaussians truncated to the bounds: one at each observation with
//   weight 1 and one prior component at the box centre with width = the range and weight `prior_weight`;
//   each observation's width is the larger distance to its sorted neighbours (the bounds count as
//   neighbours), clipped to [range / min(100, 1 + components), range] (Bergstra's rule, as Optuna does).
// - Losses that are NaN or infinite count as worse than every finite one.
// - Deterministic: the same objective, box, options and seed give the same trials in the same order
//   (SeededRandom; ties broken by trial index). The objective is called once per trial, in order.
#pragma once

#include <functional>

#include "optimize/box.h"

namespace tmorph {

struct TpeOptions {
  unsigned trials = 200;
  unsigned startup_trials = 10;
  unsigned candidates = 24;
  double gamma = 0.1;
  unsigned max_good = 25;
  double prior_weight = 1.0;
  uint64_t seed = 0;
};

struct Trial {
  Point x;
  double loss = 0;
};

// Runs the search; returns every trial in the order evaluated. Throws InvalidArgument for an empty box, a
// dimension with low >= high or non-finite bounds, or zero trials.
std::vector<Trial> tpe_search(const std::vector<SearchDimension>& box, const std::function<double(const Point&)>& objective,
                              const TpeOptions& options);

// The index of the best trial (lowest loss, first on ties; NaN is worst).
size_t best_trial(const std::vector<Trial>& trials);

}  // namespace tmorph
