// display.colorize: the host-built thresholds (display/thresholds.h) give the reference colour index for
// every golden input and many others (values next to each threshold included), and the CPU op placed
// through the planner (display/placed_colorize.h) equals the goldens and the reference colorize() /
// histogram256().
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cpu/cpu_backend.h"
#include "display/colormap.h"
#include "display/display_kernels.h"
#include "display/placed_colorize.h"
#include "display/thresholds.h"
#include "display/transform.h"
#include "display_goldens.h"
#include "ops/kernel_call.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/error.h"
#include "tensormorph/planner.h"

namespace tmorph {
namespace {

constexpr double kNanValue = std::numeric_limits<double>::quiet_NaN();
constexpr double kInfValue = std::numeric_limits<double>::infinity();
constexpr double kMax = std::numeric_limits<double>::max();

// Every input the thresholds must classify like the reference: the given values, specials, each finite
// threshold and its neighbours (and their negatives: under |x| they share the key), random values.
std::vector<double> probe_values(const std::vector<double>& given, const DisplayParams& p, const ColorThresholds& th,
                                 uint64_t seed) {
  std::vector<double> v = given;
  for (double x : {0.0, -0.0, 1.0, -1.0, kMax, -kMax, 5e-324, -5e-324, 2.2250738585072014e-308, kInfValue, -kInfValue, kNanValue,
                   p.limits.lo, p.limits.hi, p.log_floor, -p.log_floor})
    v.push_back(x);
  for (double t : th.t) {
    if (!std::isfinite(t)) continue;
    for (double x : {t, std::nextafter(t, -kInfValue), std::nextafter(t, kInfValue)}) v.push_back(x), v.push_back(-x);
  }
  std::mt19937_64 rng(seed);
  const double lo = p.limits.lo, hi = p.limits.hi, span = hi - lo > 0 && std::isfinite(hi - lo) ? hi - lo : 1.0;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < 3000; ++i) {
    const double u = unit(rng);
    switch (i % 4) {
      case 0: v.push_back(lo - span / 4 + u * span * 1.5); break;         // around the limits
      case 1: {                                                            // any finite bit pattern
        uint64_t b = rng();
        double x;
        std::memcpy(&x, &b, 8);
        v.push_back(std::isfinite(x) ? x : u);
        break;
      }
      case 2: v.push_back((rng() & 1 ? -1.0 : 1.0) * std::pow(10.0, -15.0 + 30.0 * u)); break;  // magnitudes
      default: v.push_back((rng() & 1 ? -1.0 : 1.0) * (std::fabs(lo) + u * (std::fabs(hi) - std::fabs(lo)))); break;
    }
  }
  return v;
}

void expect_thresholds_match(const DisplayParams& p, const std::vector<double>& given, const std::string& where, uint64_t seed) {
  const ColorThresholds th = color_thresholds(p);
  EXPECT_EQ(th.key, threshold_key(p.transform)) << where;
  for (size_t k = 1; k < th.t.size(); ++k) ASSERT_LE(th.t[k - 1], th.t[k]) << where << ", threshold " << k;
  for (double t : th.t) ASSERT_FALSE(std::isnan(t)) << where;
  const Normalizer nz(p.limits, p.transform, p.log_floor);
  size_t bad = 0;
  for (double x : probe_values(given, p, th, seed)) {
    const uint32_t want = reference_color_index(nz, x), got = color_index_by_thresholds(th, x);
    if (want != got && ++bad <= 5)
      ADD_FAILURE() << where << ": x = " << x << " (" << std::hexfloat << x << std::defaultfloat << ") reference "
                    << want << ", thresholds " << got;
  }
  EXPECT_EQ(bad, 0u) << where;
}

// ---- thresholds -------------------------------------------------------------------------------------

TEST(DisplayThresholds, IndexByThresholdsEqualsTheReferenceForEveryGoldenCaseAndTransform) {
  const nlohmann::json cases = test::load_display_golden("cases")["cases"];
  ASSERT_GE(cases.size(), 10u);
  size_t checked = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const nlohmann::json& c = cases[ci];
    const std::vector<double> v = test::golden_values(c);
    for (const Transform t : {Transform::Linear, Transform::Log, Transform::SignedLog})
      for (const std::string_view map : {"gray", "RdBu_r"}) {  // plain and centred automatic limits
        DisplayRequest req = test::golden_request(c, map);
        req.transform = t;
        DisplayParams p;
        try {
          p = resolve_params(v.data(), v.size(), req);
        } catch (const Error&) {
          continue;  // these given limits are reversed under this transform (log of lo = -5, hi = 3)
        }
        expect_thresholds_match(p, v, c["name"].get<std::string>() + " / " + std::string(transform_name(t)) + " / " +
                                          std::string(map), ci * 7 + static_cast<uint64_t>(t));
        ++checked;
        if (HasFailure()) return;
      }
  }
  EXPECT_GE(checked, 2 * cases.size() * 2);
}

TEST(DisplayThresholds, ExtremeLimitsAndFloors) {
  struct Case { Transform t; double lo, hi, floor; };
  const Case cases[] = {
      {Transform::Linear, -kMax, kMax, 1e-12},  // t(hi) - t(lo) overflows: halved terms
      {Transform::Linear, -1e308, 1.7e308, 1e-12},
      {Transform::Linear, 0.0, 5e-324, 1e-12},  // a one-ulp range
      {Transform::Linear, 1.0, std::nextafter(1.0, 2.0), 1e-12},
      {Transform::Log, 0.0, kMax, 1e-300},
      {Transform::Log, 1e-300, 1e300, 1e-12},
      {Transform::Log, 0.0, 1.0, 0.5},
      {Transform::SignedLog, -kMax, kMax, 1e-12},
      {Transform::SignedLog, -1e-10, 1e-10, 1e-12},
      {Transform::SignedLog, 3.0, 3.0 + 1e-12, 1e-12},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    DisplayParams p;
    p.transform = c.t, p.limits = Limits{c.lo, c.hi}, p.log_floor = c.floor;
    char where[160];
    std::snprintf(where, sizeof where, "%s [%.17g, %.17g] floor %g", std::string(transform_name(c.t)).c_str(), c.lo, c.hi, c.floor);
    expect_thresholds_match(p, {}, where, seed++);
  }
}

TEST(DisplayThresholds, CollapsedRangeIsIndex128AndInfinitiesKeepTheirRule) {
  for (const Transform t : {Transform::Linear, Transform::Log, Transform::SignedLog}) {
    DisplayParams p;
    p.transform = t, p.limits = t == Transform::Log ? Limits{-2.0, 2.0} : Limits{2.0, 2.0};
    const ColorThresholds th = color_thresholds(p);
    for (size_t k = 1; k <= 255; ++k) EXPECT_EQ(th.t[k - 1], k <= 128 ? -kInfValue : kInfValue) << transform_name(t) << " k " << k;
    for (double x : {-kMax, -3.0, -0.0, 0.0, 2.0, 1e300, kMax}) EXPECT_EQ(color_index_by_thresholds(th, x), 128u) << x;
    EXPECT_EQ(color_index_by_thresholds(th, kInfValue), 255u);
    EXPECT_EQ(color_index_by_thresholds(th, -kInfValue), t == Transform::Log ? 255u : 0u);
    EXPECT_EQ(color_index_by_thresholds(th, kNanValue), 256u);
  }
}

TEST(DisplayThresholds, InvalidLimitsThrowLikeTheNormalizer) {
  EXPECT_THROW(color_thresholds(Limits{1.0, 0.0}, Transform::Linear, 1e-12), Error);
  EXPECT_THROW(color_thresholds(Limits{0.0, kInfValue}, Transform::Linear, 1e-12), Error);
  EXPECT_THROW(color_thresholds(Limits{-5.0, 3.0}, Transform::Log, 1e-12), Error);
  EXPECT_THROW(color_thresholds(Limits{0.0, 1.0}, Transform::Log, 0.0), Error);
}

// ---- the CPU op placed through the planner ------------------------------------------------------------

class DisplayPlaced : public ::testing::Test {
 protected:
  void SetUp() override { registry_.register_table(cpu::cpu_backend_table(), "static"); }
  Planner planner() const {
    Constraints c;
    c.strict_backend = "cpu";
    return Planner(registry_, costs_, c);
  }
  BackendRegistry registry_;
  CostModel costs_;
};

TEST_F(DisplayPlaced, CpuOpEqualsTheGoldensAndTheReference) {
  const nlohmann::json cases = test::load_display_golden("cases")["cases"];
  const Planner pl = planner();
  size_t checked = 0;
  for (std::string_view name : colormap_names()) {
    const nlohmann::json golden = test::load_display_golden(std::string(name));
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const nlohmann::json& c = cases[ci];
      const nlohmann::json& g = golden["cases"][ci];
      const std::string where = std::string(name) + " / " + c["name"].get<std::string>();
      const std::vector<double> v = test::golden_values(c);
      const DisplayParams p = resolve_params(v.data(), v.size(), test::golden_request(c, name));
      const ColorizeResult r = colorize_placed(pl, v.data(), v.size(), p, 2);
      EXPECT_EQ(r.placement.op, "display.colorize") << where;
      EXPECT_EQ(r.placement.backend, "cpu") << where;
      ASSERT_EQ(r.rgba.size(), 4 * v.size()) << where;
      EXPECT_EQ(test::hex_bytes(r.rgba.data(), r.rgba.size()), g["rgba"].get<std::string>()) << where;
      std::array<uint64_t, 256> counts{};
      for (const auto& bc : g["histogram"]["bins"]) counts.at(bc[0].get<size_t>()) = bc[1].get<uint64_t>();
      EXPECT_EQ(r.histogram.counts, counts) << where;
      EXPECT_EQ(r.histogram.nan, g["histogram"]["nan"].get<uint64_t>()) << where;
      EXPECT_EQ(r.histogram.pos_inf, g["histogram"]["pos_inf"].get<uint64_t>()) << where;
      EXPECT_EQ(r.histogram.neg_inf, g["histogram"]["neg_inf"].get<uint64_t>()) << where;
      // And the reference kernels themselves.
      std::vector<uint8_t> ref(4 * v.size());
      colorize(v.data(), v.size(), p, ref.data());
      EXPECT_EQ(r.rgba, ref) << where;
      EXPECT_EQ(r.histogram.counts, histogram256(v.data(), v.size(), p).counts) << where;
      ++checked;
    }
  }
  EXPECT_EQ(checked, colormap_names().size() * cases.size());
}

TEST_F(DisplayPlaced, CpuOpEqualsTheReferenceOnLargeMixedTilesWhateverTheThreads) {
  const Planner pl = planner();
  std::mt19937_64 rng(42);
  const size_t n = 3 * 65536 + 777;  // several pieces, one short
  std::vector<double> v(n);
  std::normal_distribution<double> normal(0.0, 3.0);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng() % 1000;
    v[i] = r == 0 ? kNanValue : r == 1 ? kInfValue : r == 2 ? -kInfValue : r == 3 ? 0.0 : r < 10 ? std::ldexp(normal(rng), -1070) : normal(rng);
  }
  struct Case { Transform t; double lo, hi; };
  for (const Case& c : {Case{Transform::Linear, -2.0, 5.0}, Case{Transform::Linear, 1.0, 1.0}, Case{Transform::Log, 1e-3, 7.0},
                        Case{Transform::Log, 0.0, 0.0}, Case{Transform::SignedLog, -4.0, 4.0}}) {
    DisplayParams p;
    p.transform = c.t, p.limits = Limits{c.lo, c.hi}, p.colormap = &colormap("viridis");
    std::vector<uint8_t> ref(4 * n);
    colorize(v.data(), n, p, ref.data());
    const DisplayHistogram h = histogram256(v.data(), n, p);
    for (unsigned threads : {1u, 4u}) {
      const ColorizeResult r = colorize_placed(pl, v.data(), n, p, threads);
      const std::string where = std::string(transform_name(c.t)) + " threads " + std::to_string(threads);
      EXPECT_EQ(r.rgba, ref) << where;
      EXPECT_EQ(r.histogram.counts, h.counts) << where;
      EXPECT_EQ(r.histogram.nan, h.nan) << where;
      EXPECT_EQ(r.histogram.pos_inf, h.pos_inf) << where;
      EXPECT_EQ(r.histogram.neg_inf, h.neg_inf) << where;
    }
  }
}

TEST_F(DisplayPlaced, MissingColourMapAndBadParamsAreRefused) {
  const Planner pl = planner();
  const double v[2] = {1.0, 2.0};
  DisplayParams p;
  p.limits = Limits{0.0, 1.0};
  EXPECT_THROW(colorize_placed(pl, v, 2, p), Error);  // no colour map
  p.colormap = &colormap("gray");
  p.limits = Limits{1.0, 0.0};
  EXPECT_THROW(colorize_placed(pl, v, 2, p), Error);  // reversed limits
  // A kernel handed decreasing thresholds refuses them.
  p.limits = Limits{0.0, 1.0};
  tm_display_colorize_params_v1 params = colorize_params(p);
  params.thresholds[10] = 1e9;
  OpRequest op;
  op.op = TM_OP_DISPLAY_COLORIZE, op.dtype = DType::F64, op.elements = 2, op.bytes = 16;
  std::vector<uint8_t> out(TM_DISPLAY_COLORIZE_COUNTS * 8 + 8);
  EXPECT_THROW(run_placed_kernel(pl.place(op), TM_OP_DISPLAY_COLORIZE, {DType::F64, v, 2, &params, sizeof params, out.data(), out.size(), 1}),
               Error);
}

}  // namespace
}  // namespace tmorph
