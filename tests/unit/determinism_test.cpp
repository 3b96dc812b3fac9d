// Results are identical whatever the thread count and however the data arrives in chunks.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <tuple>

#include "ops/moments.h"
#include "tensormorph/error.h"
#include "tensormorph/stats.h"
#include "test_support.h"

namespace tmorph {
namespace {

bool bitwise_equal(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

class Determinism : public ::testing::TestWithParam<DType> {};

TEST_P(Determinism, SameResultsFor1_2_And7Threads) {
  const DType dt = GetParam();
  const uint64_t n = 17 * TM_STATS_BLOCK_ELEMENTS + 4321;
  const auto raw = test::salted_data(dt, n, 99);
  auto reg = test::make_registry(false);
  CostModel costs;
  Planner planner(*reg, costs, {});
  StatsOptions opt;
  opt.threads = 1;
  const StatsResult one = compute_stats(raw.data(), dt, n, planner, opt);
  for (unsigned threads : {2u, 7u}) {
    opt.threads = threads;
    const StatsResult many = compute_stats(raw.data(), dt, n, planner, opt);
    test::expect_same_summary(one.moments, many.moments, std::to_string(threads) + " threads");
    ASSERT_TRUE(one.histogram && many.histogram);
    EXPECT_EQ(one.histogram->counts, many.histogram->counts);
    ASSERT_EQ(one.quantiles.size(), many.quantiles.size());
    for (size_t i = 0; i < one.quantiles.size(); ++i)
      EXPECT_TRUE(bitwise_equal(one.quantiles[i].value, many.quantiles[i].value));
  }
}

TEST_P(Determinism, SameResultsForAnyChunking) {
  const DType dt = GetParam();
  const uint64_t n = 9 * TM_STATS_BLOCK_ELEMENTS + 777;
  const auto raw = test::salted_data(dt, n, 5);
  const size_t w = dtype_size(dt);
  auto reg = test::make_registry(false);
  CostModel costs;
  Planner planner(*reg, costs, {});
  MomentsStream whole(planner, dt, n, 2);
  whole.feed(raw.data(), n);
  const MomentsSummary want = whole.finish();
  for (uint64_t chunk : {uint64_t{7}, uint64_t{4096}, uint64_t{65535}, uint64_t{65537}, uint64_t{300007}}) {
    MomentsStream s(planner, dt, n, 3);
    for (uint64_t first = 0; first < n; first += chunk) s.feed(raw.data() + first * w, std::min(chunk, n - first));
    test::expect_same_summary(want, s.finish(), "chunk " + std::to_string(chunk));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Determinism,
                         ::testing::Values(DType::F64, DType::F32, DType::BF16, DType::F16, DType::F8_E4M3FN, DType::I64,
                                           DType::U8),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(MomentsReducer, EqualsTheCanonicalTree) {
  // Blocks with one value each make the tree shape visible in the rounding of the sum.
  std::vector<tm_moments_partial_v1> blocks;
  for (int i = 0; i < 13; ++i) {
    tm_moments_partial_v1 p = empty_moments();
    p.count = p.finite_count = 1;
    p.sum = p.mean = 1.0 / (i + 3);
    p.min = p.max = p.abs_max = p.sum;
    blocks.push_back(p);
  }
  // node(k, i) over [i*2^k, (i+1)*2^k) clipped to 13 blocks.
  std::function<tm_moments_partial_v1(int, int)> node = [&](int k, int i) {
    if (k == 0) return blocks[i];
    const int half = 1 << (k - 1);
    if ((2 * i + 1) * half >= 13) return node(k - 1, 2 * i);
    return merge_moments(node(k - 1, 2 * i), node(k - 1, 2 * i + 1));
  };
  MomentsReducer r;
  for (const auto& b : blocks) r.push(b);
  const auto got = r.finish(), want = node(4, 0);
  EXPECT_TRUE(bitwise_equal(got.sum, want.sum));
  EXPECT_TRUE(bitwise_equal(got.sum_err, want.sum_err));
  EXPECT_TRUE(bitwise_equal(got.m2, want.m2));
  EXPECT_TRUE(bitwise_equal(got.mean, want.mean));
  EXPECT_EQ(got.count, 13u);
}

TEST(MomentsStream, RefusesMoreOrFewerElementsThanDeclared) {
  auto reg = test::make_registry(false);
  CostModel costs;
  Planner planner(*reg, costs, {});
  const float v[4] = {1, 2, 3, 4};
  MomentsStream over(planner, DType::F32, 3, 1);
  EXPECT_THROW(over.feed(v, 4), Error);
  MomentsStream under(planner, DType::F32, 4, 1);
  under.feed(v, 3);
  EXPECT_THROW(under.finish(), Error);
}

}  // namespace
}  // namespace tmorph
