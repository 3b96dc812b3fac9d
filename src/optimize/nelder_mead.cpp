// Nelder–Mead downhill simplex. Contract: nelder_mead.h.
#include "optimize/nelder_mead.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tensormorph/error.h"

namespace tmorph {

NelderMeadResult nelder_mead(const std::function<double(const Point&)>& objective, const Point& x0, const Point& step,
                             const NelderMeadOptions& o) {
  const size_t n = x0.size();
  if (n == 0 || step.size() != n) throw Error(ErrorKind::InvalidArgument, "Nelder-Mead: x0 and step must have the same, non-zero size");
  for (double s : step)
    if (!std::isfinite(s) || s == 0) throw Error(ErrorKind::InvalidArgument, "Nelder-Mead: every step must be finite and non-zero");
  NelderMeadResult out;
  const auto f = [&](const Point& x) {
    ++out.evaluations;
    const double v = objective(x);
    return std::isfinite(v) ? v : std::numeric_limits<double>::infinity();
  };
  std::vector<Point> sim(n + 1, x0);
  std::vector<double> val(n + 1);
  for (size_t i = 0; i < n; ++i) sim[i + 1][i] += step[i];
  for (size_t i = 0; i <= n; ++i) val[i] = f(sim[i]);
  const auto order = [&] {
    std::vector<size_t> idx(n + 1);
    std::iota(idx.begin(), idx.end(), size_t{0});
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return val[a] < val[b]; });
    std::vector<Point> s2;
    std::vector<double> v2;
    for (size_t i : idx) s2.push_back(sim[i]), v2.push_back(val[i]);
    sim = std::move(s2), val = std::move(v2);
  };
  const auto along = [&](const Point& a, const Point& b, double t) {  // a + t·(b − a)
    Point r(n);
    for (size_t d = 0; d < n; ++d) r[d] = a[d] + t * (b[d] - a[d]);
    return r;
  };
  order();
  while (out.iterations < o.max_iterations) {
    double xspread = 0, fspread = 0;
    for (size_t i = 1; i <= n; ++i) {
      for (size_t d = 0; d < n; ++d) xspread = std::max(xspread, std::abs(sim[i][d] - sim[0][d]));
      fspread = std::max(fspread, std::abs(val[i] - val[0]));
    }
    if (xspread <= o.xatol && fspread <= o.fatol) {
      out.converged = true;
      break;
    }
    ++out.iterations;
    Point centroid(n, 0.0);
    for (size_t i = 0; i < n; ++i)
      for (size_t d = 0; d < n; ++d) centroid[d] += sim[i][d] / static_cast<double>(n);
    const Point xr = along(centroid, sim[n], -o.alpha);
    const double fr = f(xr);
    bool shrink = false;
    if (fr < val[0]) {
      const Point xe = along(centroid, sim[n], -o.alpha * o.gamma);
      const double fe = f(xe);
      if (fe < fr) sim[n] = xe, val[n] = fe;
      else sim[n] = xr, val[n] = fr;
    } else if (fr < val[n - 1]) {
      sim[n] = xr, val[n] = fr;
    } else if (fr < val[n]) {  // outside contraction
      const Point xc = along(centroid, sim[n], -o.alpha * o.rho);
      const double fc = f(xc);
      if (fc <= fr) sim[n] = xc, val[n] = fc;
      else shrink = true;
    } else {  // inside contraction
      const Point xcc = along(centroid, sim[n], o.rho);
      const double fcc = f(xcc);
      if (fcc < val[n]) sim[n] = xcc, val[n] = fcc;
      else shrink = true;
    }
    if (shrink)
      for (size_t i = 1; i <= n; ++i) sim[i] = along(sim[0], sim[i], o.sigma), val[i] = f(sim[i]);
    order();
  }
  out.x = sim[0];
  out.value = val[0];
  return out;
}

}  // namespace tmorph
