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

// The quantile p of n sorted values, given the value of any rank (0-based): the one definition every
// kernel evaluates, whatever way it finds its order statistics.
template <class ValueOfRank>
double quantile_of(double p, uint64_t n, ValueOfRank value_of_rank) {
  uint64_t k;
  double t;
  quantile_position(p, n, &k, &t);
  const double a = value_of_rank(k);
  const double b = k + 1 < n ? value_of_rank(k + 1) : a;
  return numpy_lerp(a, b, t);
}

}  // namespace tmorph
