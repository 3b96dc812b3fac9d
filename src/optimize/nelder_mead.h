// Nelder–Mead downhill simplex, minimising (Nelder & Mead 1965; the update order and the stopping rule of
// scipy.optimize.minimize(method="Nelder-Mead") without adaptive coefficients).
//
// Contract:
// - Start: x0 and x0 + step[i]·e_i for each dimension i.
// - Each iteration orders the simplex by (value, insertion order) and tries, in order, reflection (α), expansion
//   (γ), outside or inside contraction (ρ) and otherwise shrinks every vertex towards the best (σ).
// - Stops when both max_i ‖x_i − x_best‖_∞ ≤ xatol and max_i |f_i − f_best| ≤ fatol (converged = true), or
//   after max_iterations iterations (converged = false). An iteration is one update of the simplex (scipy
//   reports this count + 1 as nit, and runs at most maxiter − 1 updates).
// - The objective sees the raw simplex coordinates: a caller with bounds or periodic dimensions maps them
//   inside the objective (and maps the result). Deterministic: no randomness.
#pragma once

#include <functional>

#include "optimize/box.h"

namespace tmorph {

struct NelderMeadOptions {
  double alpha = 1, gamma = 2, rho = 0.5, sigma = 0.5;
  double xatol = 0.1, fatol = 1e-8;
  unsigned max_iterations = 300;
};

struct NelderMeadResult {
  Point x;
  double value = 0;
  unsigned iterations = 0;
  unsigned evaluations = 0;
  bool converged = false;
};

// Throws InvalidArgument when x0 and step differ in size, x0 is empty or a step is zero or non-finite.
NelderMeadResult nelder_mead(const std::function<double(const Point&)>& objective, const Point& x0, const Point& step,
                             const NelderMeadOptions& options);

}  // namespace tmorph
