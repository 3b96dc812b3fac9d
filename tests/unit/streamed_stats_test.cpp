// streamed_float_stats: two passes over pieces give exactly what compute_stats gives over the whole
// array (moments, histogram counts, quantiles), whatever the piece size.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "ops/streamed_stats.h"
#include "test_support.h"
#include "tensormorph/stats.h"

namespace tmorph {
namespace {

void expect_same_stats(const StatsResult& want, const StatsResult& got) {
  const auto bits = [](double x) { uint64_t b; std::memcpy(&b, &x, 8); return b; };
  const MomentsSummary &a = want.moments, &b = got.moments;
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.finite_count, b.finite_count);
  EXPECT_EQ(a.nan_count, b.nan_count);
  EXPECT_EQ(a.inf_count, b.inf_count);
  EXPECT_EQ(a.zero_count, b.zero_count);
  for (auto [x, y] : {std::pair{a.min, b.min}, {a.max, b.max}, {a.sum, b.sum}, {a.mean, b.mean}, {a.std, b.std}})
    EXPECT_EQ(bits(x), bits(y)) << x << " vs " << y;
  ASSERT_EQ(want.histogram.has_value(), got.histogram.has_value());
  if (want.histogram) {
    EXPECT_EQ(want.histogram->edges, got.histogram->edges);
    EXPECT_EQ(want.histogram->counts, got.histogram->counts);
    EXPECT_EQ(want.histogram->below, got.histogram->below);
    EXPECT_EQ(want.histogram->above, got.histogram->above);
  }
  ASSERT_EQ(want.quantiles.size(), got.quantiles.size());
  for (size_t i = 0; i < want.quantiles.size(); ++i) {
    if (std::isnan(want.quantiles[i].value)) EXPECT_TRUE(std::isnan(got.quantiles[i].value));
    else EXPECT_EQ(bits(want.quantiles[i].value), bits(got.quantiles[i].value)) << "p = " << want.quantiles[i].p;
  }
}

StatsResult streamed(const std::vector<float>& v, uint64_t piece, const Planner& planner, const StatsOptions& options) {
  Placement decode;
  decode.op = "test.produce";
  int passes = 0;
  StatsResult r = streamed_float_stats(
      v.size(), decode,
      [&](const FloatSink& sink) {
        ++passes;
        for (uint64_t first = 0; first < v.size(); first += piece) sink(v.data() + first, std::min<uint64_t>(piece, v.size() - first));
      },
      planner, options);
  EXPECT_LE(passes, 2);
  return r;
}

class StreamedStats : public ::testing::Test {
 protected:
  std::unique_ptr<BackendRegistry> registry = test::make_registry(false);
  CostModel costs;
  Planner planner{*registry, costs, {}};
};

TEST_F(StreamedStats, SaltedFloatsInPiecesOfAnySizeMatchComputeStats) {
  const auto raw = test::salted_data(DType::F32, 300'001, 7);
  std::vector<float> v(raw.size() / 4);
  std::memcpy(v.data(), raw.data(), raw.size());
  StatsOptions options;
  options.probabilities = {0.0, 0.001, 0.25, 0.5, 0.75, 0.999, 1.0};
  const StatsResult want = compute_stats(v.data(), DType::F32, v.size(), planner, options);
  for (uint64_t piece : {uint64_t{1}, uint64_t{4097}, uint64_t{65536}, uint64_t{1} << 20}) {
    if (piece == 1) {  // one value at a time: a short prefix keeps it quick
      std::vector<float> head(v.begin(), v.begin() + 5000);
      expect_same_stats(compute_stats(head.data(), DType::F32, head.size(), planner, options), streamed(head, 1, planner, options));
      continue;
    }
    SCOPED_TRACE(piece);
    expect_same_stats(want, streamed(v, piece, planner, options));
  }
}

TEST_F(StreamedStats, ManyEqualValuesAndExplicitEdges) {
  std::vector<float> v(200'000, 0.25f);
  for (size_t i = 0; i < v.size(); i += 3) v[i] = -0.0f;
  v[17] = 1e-40f;  // subnormal
  StatsOptions options;
  options.histogram_edges = {-1.0, 0.0, 0.1, 0.25, 0.3};
  expect_same_stats(compute_stats(v.data(), DType::F32, v.size(), planner, options), streamed(v, 12345, planner, options));
}

TEST_F(StreamedStats, NoFiniteValueGivesNaNQuantilesAndNoHistogram) {
  std::vector<float> v(1000, std::numeric_limits<float>::quiet_NaN());
  v[3] = std::numeric_limits<float>::infinity();
  StatsOptions options;
  expect_same_stats(compute_stats(v.data(), DType::F32, v.size(), planner, options), streamed(v, 100, planner, options));
}

TEST_F(StreamedStats, MomentsOnlyIsOnePass) {
  const auto raw = test::salted_data(DType::F32, 70'000, 3);
  std::vector<float> v(raw.size() / 4);
  std::memcpy(v.data(), raw.data(), raw.size());
  StatsOptions options;
  options.histogram = false;
  options.quantiles = false;
  int passes = 0;
  Placement decode;
  streamed_float_stats(v.size(), decode, [&](const FloatSink& sink) { ++passes; sink(v.data(), v.size()); }, planner, options);
  EXPECT_EQ(passes, 1);
}

}  // namespace
}  // namespace tmorph
