// The CPU reference display kernels against goldens written by an independent numpy + matplotlib script
// (tests/tools/display_goldens.py), plus the contract's edge cases one by one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "display/colormap.h"
#include "display/display_kernels.h"
#include "display/transform.h"
#include "display_goldens.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<uint8_t> entry(const Colormap& c, size_t k) { return {c.rgba[k][0], c.rgba[k][1], c.rgba[k][2], c.rgba[k][3]}; }

std::vector<uint8_t> colors(const std::vector<double>& v, const DisplayParams& p) {
  std::vector<uint8_t> out(4 * v.size(), 0xAB);
  colorize(v.data(), v.size(), p, out.data());
  return out;
}

DisplayParams params(Transform t, double lo, double hi, std::string_view map = "gray", double floor = kDefaultLogFloor) {
  DisplayParams p;
  p.transform = t;
  p.log_floor = floor;
  p.limits = Limits{lo, hi};
  p.colormap = &colormap(map);
  return p;
}

// ---- goldens ----------------------------------------------------------------------------------------

TEST(DisplayGoldens, EveryColormapHasAGoldenAndNoGoldenIsUnknown) {
  std::set<std::string> files, names;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TM_GOLDENS_DIR) + "/display"))
    if (e.path().extension() == ".json" && e.path().stem() != "cases") files.insert(e.path().stem().string());
  for (std::string_view n : colormap_names()) names.insert(std::string(n));
  EXPECT_EQ(files, names);
  EXPECT_EQ(names.size(), 11u);
}

TEST(DisplayGoldens, KernelsMatchMatplotlibByteForByte) {
  const nlohmann::json cases = test::load_display_golden("cases")["cases"];
  ASSERT_GE(cases.size(), 10u);
  size_t checked = 0;
  for (std::string_view name : colormap_names()) {
    const nlohmann::json golden = test::load_display_golden(std::string(name));
    const Colormap& cmap = colormap(name);
    EXPECT_EQ(golden["diverging"].get<bool>(), cmap.diverging) << name;
    ASSERT_EQ(golden["cases"].size(), cases.size()) << name;
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const nlohmann::json& c = cases[ci];
      const nlohmann::json& g = golden["cases"][ci];
      const std::string where = std::string(name) + " / " + c["name"].get<std::string>();
      ASSERT_EQ(g["name"], c["name"]) << where;
      std::vector<double> v;
      for (double x : test::golden_values(c)) v.push_back(x);

      DisplayRequest req;
      req.transform = parse_transform(c["transform"].get<std::string>());
      req.log_floor = c["log_floor"].get<double>();
      if (!c["lo"].is_null()) req.lo = c["lo"].get<double>();
      if (!c["hi"].is_null()) req.hi = c["hi"].get<double>();
      req.colormap = name;
      const DisplayParams p = resolve_params(v.data(), v.size(), req);
      EXPECT_EQ(p.colormap, &cmap) << where;
      EXPECT_EQ(p.limits.lo, g["lo"].get<double>()) << where;
      EXPECT_EQ(p.limits.hi, g["hi"].get<double>()) << where;

      const std::vector<uint8_t> rgba = colors(v, p);
      const std::string got = test::hex_bytes(rgba.data(), rgba.size()), want = g["rgba"].get<std::string>();
      ASSERT_EQ(want.size(), 8 * v.size()) << where;
      for (size_t i = 0; i < v.size(); ++i) {
        EXPECT_EQ(got.substr(8 * i, 8), want.substr(8 * i, 8)) << where << ", input " << i << " = " << v[i];
        // The scalar normalize() path agrees with the kernel's (branch-free for linear) path.
        const double n = normalize(v[i], p.limits, p.transform, p.log_floor);
        const std::vector<uint8_t> via_n =
            std::isnan(n) ? std::vector<uint8_t>{0, 0, 0, 0} : entry(cmap, std::min<size_t>(size_t(n * 256.0), 255));
        EXPECT_EQ(test::hex_bytes(via_n.data(), via_n.size()), want.substr(8 * i, 8)) << where << ", normalize() of input " << i;
      }

      const DisplayHistogram h = histogram256(v.data(), v.size(), p);
      std::array<uint64_t, 256> counts{};
      for (const auto& bc : g["histogram"]["bins"]) counts.at(bc[0].get<size_t>()) = bc[1].get<uint64_t>();
      EXPECT_EQ(h.counts, counts) << where;
      EXPECT_EQ(h.nan, g["histogram"]["nan"].get<uint64_t>()) << where;
      EXPECT_EQ(h.pos_inf, g["histogram"]["pos_inf"].get<uint64_t>()) << where;
      EXPECT_EQ(h.neg_inf, g["histogram"]["neg_inf"].get<uint64_t>()) << where;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 11 * cases.size());
}

// ---- colour maps ------------------------------------------------------------------------------------

TEST(DisplayColormap, UnknownNameListsTheKnownOnes) {
  try {
    colormap("viridisx");
    FAIL() << "no error for an unknown colour map";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    const std::string m = e.what();
    EXPECT_NE(m.find("viridisx"), std::string::npos) << m;
    for (std::string_view n : colormap_names()) EXPECT_NE(m.find(std::string(n)), std::string::npos) << m;
  }
  EXPECT_THROW(colormap("Viridis"), Error);  // names are case-sensitive, like matplotlib's
  EXPECT_THROW(colormap(""), Error);
}

TEST(DisplayColormap, TableSpotChecksAndKinds) {
  const Colormap& v = colormap("viridis");
  EXPECT_EQ(entry(v, 0), (std::vector<uint8_t>{68, 1, 84, 255}));
  EXPECT_EQ(entry(v, 255), (std::vector<uint8_t>{253, 231, 37, 255}));
  EXPECT_EQ(entry(colormap("gray"), 0), (std::vector<uint8_t>{0, 0, 0, 255}));
  EXPECT_EQ(entry(colormap("gray"), 200), (std::vector<uint8_t>{200, 200, 200, 255}));
  std::set<std::string> diverging;
  for (std::string_view n : colormap_names()) {
    const Colormap& c = colormap(n);
    EXPECT_EQ(c.name, n);
    if (c.diverging) diverging.insert(std::string(n));
    for (size_t k = 0; k < 256; ++k) EXPECT_EQ(c.rgba[k][3], 255) << n << " entry " << k;  // invalid stays distinct
  }
  EXPECT_EQ(diverging, (std::set<std::string>{"RdBu_r", "seismic", "coolwarm"}));
  EXPECT_TRUE(colormap("twilight").cyclic);
  EXPECT_FALSE(colormap("twilight").diverging);
}

// ---- transforms -------------------------------------------------------------------------------------

TEST(DisplayTransform, ParsesKnownNamesAndRefusesOthers) {
  EXPECT_EQ(parse_transform("linear"), Transform::Linear);
  EXPECT_EQ(parse_transform("log"), Transform::Log);
  EXPECT_EQ(parse_transform("signed-log"), Transform::SignedLog);
  for (Transform t : {Transform::Linear, Transform::Log, Transform::SignedLog})
    EXPECT_EQ(parse_transform(transform_name(t)), t);
  for (const char* bad : {"Log", "", "signed_log", "signedlog", "log10", "linear "}) {
    try {
      parse_transform(bad);
      ADD_FAILURE() << "no error for '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("signed-log"), std::string::npos) << e.what();
    }
  }
}

TEST(DisplayTransform, ValuesOfTheThreeTransforms) {
  EXPECT_EQ(apply_transform(-3.5, Transform::Linear), -3.5);
  EXPECT_EQ(apply_transform(1000.0, Transform::Log), 3.0);
  EXPECT_EQ(apply_transform(-0.01, Transform::Log), -2.0);                   // |x|
  EXPECT_EQ(apply_transform(0.0, Transform::Log), -12.0);                    // default floor 1e-12
  EXPECT_EQ(apply_transform(1e-9, Transform::Log, 1e-3), -3.0);              // caller's floor
  EXPECT_DOUBLE_EQ(apply_transform(-std::exp(2.0) + 1, Transform::SignedLog), -2.0);
  EXPECT_EQ(apply_transform(0.0, Transform::SignedLog), 0.0);
}

// ---- limits -----------------------------------------------------------------------------------------

TEST(DisplayLimits, AutomaticLimitsIgnoreNonFiniteAndCentreForDivergingMaps) {
  const std::vector<double> v = {kNan, 3.0, -2.0, kInf, 7.0, -kInf, 0.5};
  auto lim = [&](Transform t, bool div) { return auto_limits(v.data(), v.size(), t, div); };
  EXPECT_EQ(lim(Transform::Linear, false).lo, -2.0);
  EXPECT_EQ(lim(Transform::Linear, false).hi, 7.0);
  EXPECT_EQ(lim(Transform::Linear, true).lo, -7.0);
  EXPECT_EQ(lim(Transform::Linear, true).hi, 7.0);
  EXPECT_EQ(lim(Transform::SignedLog, true).lo, -7.0);
  EXPECT_EQ(lim(Transform::Log, true).lo, 0.5);  // log: |x|, never centred
  EXPECT_EQ(lim(Transform::Log, true).hi, 7.0);
  const std::vector<double> pos = {2.0, 5.0};
  EXPECT_EQ(auto_limits(pos.data(), pos.size(), Transform::Linear, true).lo, 2.0);  // not signed: not centred
  const std::vector<double> none = {kNan, kInf, -kInf};
  EXPECT_EQ(auto_limits(none.data(), none.size(), Transform::Linear, false).lo, 0.0);
  EXPECT_EQ(auto_limits(none.data(), none.size(), Transform::Linear, false).hi, 0.0);

  // Through resolve_params: the map decides; a given end turns the centring off.
  DisplayRequest r;
  r.colormap = "RdBu_r";
  DisplayParams p = resolve_params(v.data(), v.size(), r);
  EXPECT_EQ(p.limits.lo, -7.0);
  EXPECT_EQ(p.limits.hi, 7.0);
  EXPECT_EQ(colors({0.0}, p), entry(colormap("RdBu_r"), 128));  // zero sits at the centre
  r.colormap = "twilight";
  EXPECT_EQ(resolve_params(v.data(), v.size(), r).limits.lo, -2.0);
  r.colormap = "RdBu_r";
  r.hi = 10.0;
  p = resolve_params(v.data(), v.size(), r);
  EXPECT_EQ(p.limits.lo, -2.0);
  EXPECT_EQ(p.limits.hi, 10.0);
}

TEST(DisplayLimits, InvalidLimitsAreRefused) {
  auto refused = [](Transform t, double lo, double hi, double floor = kDefaultLogFloor) {
    try {
      Normalizer(Limits{lo, hi}, t, floor);
    } catch (const Error& e) {
      return e.kind() == ErrorKind::InvalidArgument;
    }
    return false;
  };
  EXPECT_TRUE(refused(Transform::Linear, 2.0, 1.0));
  EXPECT_TRUE(refused(Transform::Linear, kNan, 1.0));
  EXPECT_TRUE(refused(Transform::Linear, 0.0, kInf));
  EXPECT_TRUE(refused(Transform::Log, -5.0, 3.0));  // t(lo) = log10 5 > t(hi) = log10 3
  EXPECT_TRUE(refused(Transform::Log, 1.0, 2.0, 0.0));
  EXPECT_TRUE(refused(Transform::Log, 1.0, 2.0, -1.0));
  EXPECT_TRUE(refused(Transform::Log, 1.0, 2.0, kNan));
  EXPECT_FALSE(refused(Transform::Log, 1.0, 2.0));
  EXPECT_FALSE(refused(Transform::Linear, 1.0, 1.0));

  DisplayRequest r;
  r.lo = 5.0;  // above every value: the automatic hi (3) is below it
  const std::vector<double> v = {1.0, 3.0};
  EXPECT_THROW(resolve_params(v.data(), v.size(), r), Error);
  r.colormap = "nope";
  EXPECT_THROW(resolve_params(v.data(), v.size(), r), Error);

  DisplayParams p = params(Transform::Linear, 0.0, 1.0);
  p.colormap = nullptr;
  std::vector<uint8_t> out(4);
  EXPECT_THROW(colorize(v.data(), 1, p, out.data()), Error);
}

// ---- kernels: the contract's edge cases -------------------------------------------------------------

TEST(DisplayKernels, CollapsedRangeIsTheMiddleForFiniteValues) {
  const Colormap& g = colormap("gray");
  for (Transform t : {Transform::Linear, Transform::Log, Transform::SignedLog}) {
    const DisplayParams p = params(t, 2.0, 2.0);
    EXPECT_EQ(normalize(-40.0, p.limits, t), 0.5);
    const std::vector<double> v = {2.0, -40.0, 1e300, 0.0};
    const std::vector<uint8_t> rgba = colors(v, p);
    for (size_t i = 0; i < v.size(); ++i)
      EXPECT_EQ(std::vector<uint8_t>(rgba.begin() + 4 * i, rgba.begin() + 4 * i + 4), entry(g, 128)) << i;
    const DisplayHistogram h = histogram256(v.data(), v.size(), p);
    EXPECT_EQ(h.counts[128], 4u);
  }
}

TEST(DisplayKernels, NanIsTransparentAndNotBinned) {
  for (Transform t : {Transform::Linear, Transform::Log, Transform::SignedLog}) {
    const DisplayParams p = params(t, 1.0, 10.0, "viridis");
    EXPECT_TRUE(std::isnan(normalize(kNan, p.limits, t)));
    EXPECT_EQ(colors({kNan}, p), (std::vector<uint8_t>{0, 0, 0, 0}));
    const std::vector<double> v = {kNan, 5.0, kNan};
    const DisplayHistogram h = histogram256(v.data(), v.size(), p);
    EXPECT_EQ(h.nan, 2u);
    uint64_t binned = 0;
    for (uint64_t c : h.counts) binned += c;
    EXPECT_EQ(binned, 1u);
  }
}

TEST(DisplayKernels, InfinitiesGoToTheEnds) {
  const Colormap& m = colormap("magma");
  std::vector<uint8_t> ends = entry(m, 255), bottom = entry(m, 0);
  ends.insert(ends.end(), bottom.begin(), bottom.end());
  for (bool collapsed : {false, true}) {
    const double hi = collapsed ? 1.0 : 10.0;
    const std::vector<double> v = {kInf, -kInf};
    for (Transform t : {Transform::Linear, Transform::SignedLog})
      EXPECT_EQ(colors(v, params(t, 1.0, hi, "magma")), ends) << transform_name(t);
    auto top = entry(m, 255);
    top.insert(top.end(), top.begin(), top.end());
    EXPECT_EQ(colors(v, params(Transform::Log, 1.0, hi, "magma")), top);  // |±Inf| = Inf
    const DisplayHistogram h = histogram256(v.data(), v.size(), params(Transform::Linear, 1.0, hi));
    EXPECT_EQ(h.pos_inf, 1u);
    EXPECT_EQ(h.neg_inf, 1u);
    EXPECT_EQ(h.counts[0] + h.counts[255], 0u);
  }
}

TEST(DisplayKernels, BinEdgesAndClamping) {
  // lo = -3, hi = 5: x = -3 + k/32 is exactly the lower edge of bin k.
  const DisplayParams p = params(Transform::Linear, -3.0, 5.0);
  std::vector<double> v;
  for (int k : {0, 1, 100, 255, 256}) v.push_back(-3.0 + k / 32.0);
  // Just below edge 1: bin 0 (x - lo is exact here, Sterbenz; far from lo the ulp would be lost).
  v.push_back(std::nextafter(-3.0 + 1 / 32.0, -kInf));
  v.push_back(-1e300);
  v.push_back(1e300);
  const DisplayHistogram h = histogram256(v.data(), v.size(), p);
  std::array<uint64_t, 256> want{};
  want[0] = 3, want[1] = 1, want[100] = 1, want[255] = 3;
  EXPECT_EQ(h.counts, want);
  // Limits near ±DBL_MAX: the range overflows and is halved; 0 is still the exact middle.
  const double big = std::numeric_limits<double>::max();
  EXPECT_EQ(normalize(0.0, Limits{-big, big}, Transform::Linear), 0.5);
  EXPECT_EQ(normalize(big, Limits{-big, big}, Transform::Linear), 1.0);
  const std::vector<double> zero = {0.0};
  EXPECT_EQ(histogram256(zero.data(), 1, params(Transform::Linear, -big, big)).counts[128], 1u);
}

TEST(DisplayKernels, LongInputsAndTilesAgreeWithShortOnes) {
  // More than one internal chunk, every path: the result per value must not depend on its neighbours,
  // and histograms of tiles add up to the histogram of the whole.
  std::vector<double> v;
  for (int i = 0; i < 5000; ++i) v.push_back(i % 97 == 0 ? kNan : i % 89 == 0 ? -kInf : (i * 0.37) - 600.0);
  for (Transform t : {Transform::Linear, Transform::Log, Transform::SignedLog}) {
    const DisplayParams p = params(t, 1.0, 1000.0, "turbo");
    const std::vector<uint8_t> whole = colors(v, p);
    for (size_t i = 0; i < v.size(); i += 371) {
      const std::vector<uint8_t> one = colors({v[i]}, p);
      EXPECT_TRUE(std::equal(one.begin(), one.end(), whole.begin() + 4 * i)) << transform_name(t) << " " << i;
    }
    DisplayHistogram tiles;
    for (size_t b = 0; b < v.size(); b += 1500) tiles += histogram256(v.data() + b, std::min<size_t>(1500, v.size() - b), p);
    const DisplayHistogram all = histogram256(v.data(), v.size(), p);
    EXPECT_EQ(tiles.counts, all.counts);
    EXPECT_EQ(tiles.nan, all.nan);
    EXPECT_EQ(tiles.neg_inf, all.neg_inf);
    uint64_t total = all.nan + all.pos_inf + all.neg_inf;
    for (uint64_t c : all.counts) total += c;
    EXPECT_EQ(total, v.size());
  }
}

}  // namespace
}  // namespace tmorph
