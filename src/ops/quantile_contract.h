// The quantile definition every backend follows (op_contracts.h, TM_OP_STATS_QUANTILES).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tmorph {

// numpy's "linear" interpolation between neighbouring order statistics a <= b at fraction t,
// written the way numpy evaluates it so results match bit for bit.
inline double numpy_lerp(double a, double b, double t) {
  const double diff = b - a;
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}

// For probability p over n >= 1 sorted values: the lower order-statistic index and the fraction.
inline void quantile_position(double p, uint64_t n, uint64_t* k, double* t) {
  const double h = static_cast<double>(n - 1) * p;
  const double f = std::floor(h);
  *k = std::min<uint64_t>(static_cast<uint64_t>(f), n - 1);
  *t = h - f;
}

}  // namespace tmorph
