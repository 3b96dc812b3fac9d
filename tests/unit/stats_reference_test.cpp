// compute_stats for every dtype against an independent long-double reference on salted random data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tensormorph/contract_math.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/stats.h"
#include "test_support.h"

namespace tmorph {
namespace {

struct Reference {
  uint64_t count = 0, finite = 0, nan = 0, inf = 0, zero = 0;
  double min = INFINITY, max = -INFINITY, abs_max = 0;
  long double sum = 0, abs_sum = 0, mean = 0, std = 0;
  std::vector<double> sorted;  // finite values
};

Reference reference(DType dt, const std::vector<uint8_t>& raw) {
  Reference r;
  const auto v = test::to_doubles(dt, raw);
  r.count = v.size();
  long double c = 0;  // Kahan compensation in long double
  for (double x : v) {
    if (std::isnan(x)) { ++r.nan; continue; }
    if (x == 0) ++r.zero;
    if (std::isinf(x)) { ++r.inf; continue; }
    ++r.finite;
    r.min = std::min(r.min, x), r.max = std::max(r.max, x), r.abs_max = std::max(r.abs_max, std::fabs(x));
    const long double y = static_cast<long double>(x) - c;
    const long double t = r.sum + y;
    c = (t - r.sum) - y;
    r.sum = t;
    r.abs_sum += std::fabs(static_cast<long double>(x));
    r.sorted.push_back(x);
  }
  if (r.finite) {
    r.mean = r.sum / r.finite;
    long double m2 = 0;
    for (double x : r.sorted) m2 += (x - r.mean) * (x - r.mean);
    r.std = std::sqrt(m2 / r.finite);
  }
  std::sort(r.sorted.begin(), r.sorted.end());
  return r;
}

class StatsReference : public ::testing::TestWithParam<DType> {};

TEST_P(StatsReference, MatchesLongDoubleReference) {
  const DType dt = GetParam();
  const uint64_t n = 3 * TM_STATS_BLOCK_ELEMENTS + 12345;  // several blocks and a short tail
  const auto raw = test::salted_data(dt, n, 1234 + static_cast<int>(dt));
  auto reg = test::make_registry(false);
  CostModel costs;
  Planner planner(*reg, costs, {});
  StatsOptions opt;
  opt.threads = 2;
  const StatsResult res = compute_stats(raw.data(), dt, n, planner, opt);
  const Reference ref = reference(dt, raw);
  const auto& m = res.moments;

  EXPECT_EQ(m.count, ref.count);
  EXPECT_EQ(m.finite_count, ref.finite);
  EXPECT_EQ(m.nan_count, ref.nan);
  EXPECT_EQ(m.inf_count, ref.inf);
  EXPECT_EQ(m.zero_count, ref.zero);
  EXPECT_EQ(m.min, ref.min);
  EXPECT_EQ(m.max, ref.max);
  EXPECT_EQ(m.abs_max, ref.abs_max);
  // Compensated sum: error far below one ulp of the sum of magnitudes.
  const double sum_tol = static_cast<double>(ref.abs_sum) * 1e-14 + 1e-300;
  EXPECT_NEAR(m.sum, static_cast<double>(ref.sum), sum_tol);
  EXPECT_NEAR(m.mean, static_cast<double>(ref.mean), sum_tol / static_cast<double>(ref.finite));
  EXPECT_NEAR(m.std, static_cast<double>(ref.std), static_cast<double>(ref.std) * 1e-10 + 1e-300);

  if (m.is_integer) {  // exact decimal strings
    __int128 s = 0;
    const auto v = test::to_doubles(dt, raw);
    for (uint64_t i = 0; i < n; ++i) {
      int64_t si = 0;
      uint64_t ui = 0;
      std::memcpy(&si, raw.data() + i * dtype_size(dt), dtype_size(dt));
      std::memcpy(&ui, raw.data() + i * dtype_size(dt), dtype_size(dt));
      const int shift = 64 - 8 * static_cast<int>(dtype_size(dt));
      if (dt == DType::BOOL) s += raw[i] ? 1 : 0;
      else if (dtype_is_signed_int(dt)) s += shift ? (si << shift) >> shift : si;
      else s += ui;
    }
    std::string digits;
    const bool neg = s < 0;
    unsigned __int128 u = neg ? -static_cast<unsigned __int128>(s) : static_cast<unsigned __int128>(s);
    do digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(u % 10))), u /= 10; while (u);
    if (neg) digits.insert(digits.begin(), '-');
    EXPECT_EQ(m.int_sum, digits);
  }

  // Histogram: every finite value binned by comparison against the reported edges.
  ASSERT_TRUE(res.histogram.has_value());
  const auto& h = *res.histogram;
  ASSERT_EQ(h.counts.size(), 256u);
  std::vector<uint64_t> want(256, 0);
  for (double x : ref.sorted) {
    size_t b = static_cast<size_t>(std::upper_bound(h.edges.begin(), h.edges.end(), x) - h.edges.begin()) - 1;
    want[std::min<size_t>(b, 255)]++;
  }
  EXPECT_EQ(h.counts, want);
  EXPECT_EQ(h.below + h.above, 0u);

  // Quantiles: numpy's linear method over the sorted finite values, exactly.
  ASSERT_EQ(res.quantiles.size(), 5u);
  EXPECT_TRUE(res.quantiles_exact);
  for (const auto& q : res.quantiles) {
    uint64_t k;
    double t;
    quantile_position(q.p, ref.sorted.size(), &k, &t);
    const double want_q = numpy_lerp(ref.sorted[k], ref.sorted[std::min<uint64_t>(k + 1, ref.sorted.size() - 1)], t);
    EXPECT_EQ(q.value, want_q) << "p=" << q.p;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDType, StatsReference, ::testing::ValuesIn(kAllDTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(StatsReference, EmptyTensorReportsZeros) {
  auto reg = test::make_registry(false);
  CostModel costs;
  Planner planner(*reg, costs, {});
  const StatsResult r = compute_stats(nullptr, DType::F32, 0, planner, {});
  EXPECT_EQ(r.moments.count, 0u);
  EXPECT_FALSE(r.histogram.has_value());
}

TEST(StatsReference, ExplicitHistogramRangeCountsOutsiders) {
  const float v[] = {-2, -1, 0, 0.5f, 1, 2, NAN};
  auto reg = test::make_registry(false);
  CostModel costs;
  Planner planner(*reg, costs, {});
  StatsOptions opt;
  opt.bins = 4;
  opt.histogram_range = std::make_pair(-1.0, 1.0);
  const StatsResult r = compute_stats(v, DType::F32, 7, planner, opt);
  ASSERT_TRUE(r.histogram);
  EXPECT_EQ(r.histogram->counts, (std::vector<uint64_t>{1, 0, 1, 2}));  // [0.5, 1] closed: 0.5 and 1
  EXPECT_EQ(r.histogram->below, 1u);
  EXPECT_EQ(r.histogram->above, 1u);
}

}  // namespace
}  // namespace tmorph
