// The optimisers behind the SSB fit: Nelder–Mead against scipy's (a reference we did not write: same
// iterations, evaluations and result on Rosenbrock's function), the TPE search finding a minimum and
// being deterministic, and bad arguments refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "optimize/nelder_mead.h"
#include "optimize/tpe.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace {

double rosenbrock(const Point& x) { return 100 * std::pow(x[1] - x[0] * x[0], 2) + std::pow(1 - x[0], 2); }

TEST(NelderMead, MatchesScipyOnRosenbrock) {
  // scipy 1.10.1: minimize(rosen, [-1.2, 1], method="Nelder-Mead", options=dict(initial_simplex=[x0, x0 + 0.1·e0,
  // x0 + 0.1·e1], xatol=1e-6, fatol=1e-10, maxiter=1000)) -> x [1.00000019, 1.00000039], nit 111, nfev 203
  // (scipy's nit starts at 1: 110 simplex updates).
  NelderMeadOptions o;
  o.xatol = 1e-6, o.fatol = 1e-10, o.max_iterations = 1000;
  const NelderMeadResult r = nelder_mead(rosenbrock, {-1.2, 1.0}, {0.1, 0.1}, o);
  EXPECT_TRUE(r.converged);
  EXPECT_EQ(r.iterations, 110u);
  EXPECT_EQ(r.evaluations, 203u);
  EXPECT_NEAR(r.x[0], 1.00000019, 1e-8);
  EXPECT_NEAR(r.x[1], 1.00000039, 1e-8);
}

TEST(NelderMead, StopsAtTheIterationLimitAndRefusesBadArguments) {
  NelderMeadOptions o;
  o.max_iterations = 5;
  const NelderMeadResult r = nelder_mead(rosenbrock, {-1.2, 1.0}, {0.1, 0.1}, o);
  EXPECT_FALSE(r.converged);
  EXPECT_EQ(r.iterations, 5u);
  EXPECT_THROW(nelder_mead(rosenbrock, {1.0, 1.0}, {0.1}, o), Error);
  EXPECT_THROW(nelder_mead(rosenbrock, {1.0, 1.0}, {0.1, 0.0}, o), Error);
  // A NaN objective counts as worse than anything, never as a minimum.
  const NelderMeadResult n = nelder_mead([](const Point& x) { return x[0] < 0 ? std::nan("") : x[0] * x[0]; }, {0.5}, {-1.0}, {});
  EXPECT_GE(n.x[0], 0.0);
  EXPECT_LE(n.x[0], 0.1);
}

TEST(Tpe, FindsTheBasinAndIsDeterministic) {
  const std::vector<SearchDimension> box = {{"a", -10, 10}, {"b", 0, 5}};
  const auto f = [](const Point& x) { return std::pow(x[0] - 3.3, 2) + 4 * std::pow(x[1] - 1.2, 2); };
  TpeOptions o;
  o.trials = 100, o.seed = 11;
  const auto trials = tpe_search(box, f, o);
  ASSERT_EQ(trials.size(), 100u);
  const Trial& best = trials[best_trial(trials)];
  EXPECT_LT(best.loss, 0.3);
  for (const Trial& t : trials) {
    EXPECT_GE(t.x[0], -10);
    EXPECT_LE(t.x[0], 10);
    EXPECT_GE(t.x[1], 0);
    EXPECT_LE(t.x[1], 5);
  }
  // Better than the same number of uniform draws on average: the later half concentrates near the minimum.
  double early = 0, late = 0;
  for (size_t i = 0; i < 50; ++i) early += trials[i].loss, late += trials[50 + i].loss;
  EXPECT_LT(late, early / 2);
  const auto again = tpe_search(box, f, o);
  for (size_t i = 0; i < trials.size(); ++i) EXPECT_EQ(std::memcmp(trials[i].x.data(), again[i].x.data(), 2 * sizeof(double)), 0);
  o.seed = 12;
  EXPECT_NE(tpe_search(box, f, o)[0].x, trials[0].x);
}

TEST(Tpe, RefusesBadBoxesAndRanksNanLast) {
  TpeOptions o;
  o.trials = 5;
  const auto f = [](const Point&) { return 1.0; };
  EXPECT_THROW(tpe_search({}, f, o), Error);
  EXPECT_THROW(tpe_search({{"x", 1, 1}}, f, o), Error);
  EXPECT_THROW(tpe_search({{"x", 0, INFINITY}}, f, o), Error);
  o.trials = 0;
  EXPECT_THROW(tpe_search({{"x", 0, 1}}, f, o), Error);
  EXPECT_EQ(best_trial({{{0.0}, std::nan("")}, {{1.0}, 5.0}, {{2.0}, 5.0}}), 1u);
}

}  // namespace
}  // namespace tmorph

#include "support/fast_atan2.h"

namespace tmorph {
namespace {

TEST(FastAtan2, WithinTenPicoRadiansOfStdAtan2) {
  SeededRandom rng(3);
  double worst = 0;
  for (int i = 0; i < 2000000; ++i) {
    const double scale = std::ldexp(1.0, static_cast<int>(rng.next() % 80) - 40);
    const double y = (rng.uniform() * 2 - 1) * scale, x = (rng.uniform() * 2 - 1) * scale;
    worst = std::max(worst, std::abs(fast_atan2(y, x) - std::atan2(y, x)));
  }
  EXPECT_LT(worst, 1e-10);
  // Axes, diagonals, signed zeros and the branch cut as std::atan2.
  for (double y : {0.0, -0.0, 1.0, -1.0, 1e-300, 3.0})
    for (double x : {0.0, -0.0, 1.0, -1.0, 1e-300, -2.0})
      EXPECT_NEAR(fast_atan2(y, x), std::atan2(y, x), 1e-10) << y << ", " << x;
  EXPECT_TRUE(std::signbit(fast_atan2(-0.0, 1.0)));
  EXPECT_DOUBLE_EQ(fast_atan2(-0.0, -1.0), -M_PI);
}

}  // namespace
}  // namespace tmorph
