// Statistics pyramids: layouts, every tile at every level against a direct computation over its
// elements, the top against the tensor's global statistics, independence from how data is fed.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "lod/pyramid.h"
#include "ops/tile_stats.h"
#include "test_support.h"
#include "tensormorph/error.h"
#include "tensormorph/stats.h"

namespace tmorph {
namespace {

// Level-0 tiles by lod.tile_stats placed on the CPU backend, the reference (ops/tile_stats.h).
TileStatsKernel cpu_tiles(DType dtype) { return PlacedTileStats(test::cpu_planner(), dtype, 0, 0, 1); }

uint64_t bits_of(double x) {
  uint64_t b;
  std::memcpy(&b, &x, 8);
  return b;
}

// Direct statistics over the rectangle, histogram by comparing values with the edges (-0 sorts just
// below +0, as its order key does).
TileStats direct(const std::vector<double>& v, const View2D& view, uint64_t slice, const TileRange& r,
                 const std::vector<double>& edges) {
  std::vector<double> xs;
  for (uint64_t row = r.row_begin; row < r.row_end; ++row)
    for (uint64_t col = r.col_begin; col < r.col_end; ++col) xs.push_back(v[(slice * view.rows + row) * view.cols + col]);
  TileStats t;
  t.count = xs.size();
  double sum = 0;
  for (double x : xs) {
    if (std::isnan(x)) ++t.nan;
    else if (std::isinf(x)) ++t.inf;
    else {
      t.zero += x == 0;
      t.min = std::min(t.min, x), t.max = std::max(t.max, x), t.abs_max = std::max(t.abs_max, std::fabs(x));
      sum += x;
    }
  }
  t.sum = sum;
  const double mean = t.finite() ? sum / static_cast<double>(t.finite()) : 0;
  for (double x : xs)
    if (std::isfinite(x)) t.m2 += (x - mean) * (x - mean);
  t.hist.assign(edges.empty() ? 0 : edges.size() - 1, 0);
  for (double x : xs) {
    if (!std::isfinite(x) || edges.empty()) continue;
    const double key = (x == 0 && std::signbit(x)) ? -std::numeric_limits<double>::denorm_min() : x;
    const size_t bin = std::upper_bound(edges.begin() + 1, edges.end() - 1, key) - (edges.begin() + 1);
    ++t.hist[bin];
  }
  return t;
}

void expect_tile(const TileStats& want, const TileStats& got, const std::string& where) {
  EXPECT_EQ(want.count, got.count) << where;
  EXPECT_EQ(want.nan, got.nan) << where;
  EXPECT_EQ(want.inf, got.inf) << where;
  EXPECT_EQ(want.zero, got.zero) << where;
  EXPECT_EQ(bits_of(want.min), bits_of(got.min)) << where;
  EXPECT_EQ(bits_of(want.max), bits_of(got.max)) << where;
  EXPECT_EQ(bits_of(want.abs_max), bits_of(got.abs_max)) << where;
  const double scale = std::max(1.0, std::fabs(want.sum));
  EXPECT_NEAR(want.sum, got.sum, 1e-9 * scale * std::max<double>(1, std::sqrt(double(want.count)))) << where;
  EXPECT_NEAR(want.m2, got.m2, 1e-9 * std::max(1.0, want.m2)) << where;
  EXPECT_EQ(want.hist, got.hist) << where;
}

TEST(PyramidLayout, TilesStayAt65536ElementsWhateverTheShape) {
  const auto vec = make_pyramid_layout(default_view({100000}));
  EXPECT_EQ(vec.view.rows, 1u);
  EXPECT_EQ(vec.tile_rows, 1u);
  EXPECT_EQ(vec.tile_cols, 65536u);
  ASSERT_EQ(vec.levels.size(), 2u);  // 1 x 2 tiles, then 1 x 1
  const auto m = make_pyramid_layout(default_view({600, 1000}));
  EXPECT_EQ(m.tile_rows, 256u);
  EXPECT_EQ(m.tile_cols, 256u);
  ASSERT_EQ(m.levels.size(), 3u);  // 3 x 4, 2 x 2, 1 x 1
  EXPECT_EQ(m.levels[0].rows, 3u);
  EXPECT_EQ(m.levels[0].cols, 4u);
  const TileRange r = m.range(1, 1, 1);
  EXPECT_EQ(r.row_begin, 512u);
  EXPECT_EQ(r.row_end, 600u);
  EXPECT_EQ(r.col_begin, 512u);
  EXPECT_EQ(r.col_end, 1000u);
  const auto few = make_pyramid_layout(default_view({5, 100000}));
  EXPECT_EQ(few.tile_rows, 8u);
  EXPECT_EQ(few.tile_cols, 8192u);
}

TEST(PyramidView, DefaultRuleAndOverride) {
  const View2D experts = default_view({8, 64, 32});
  EXPECT_EQ(experts.slices, 8u);
  EXPECT_EQ(experts.rows, 64u);
  EXPECT_EQ(experts.cols, 32u);
  const View2D conv = parse_view("0,1", {16, 8, 3, 3});
  EXPECT_EQ(conv.slices, 1u);
  EXPECT_EQ(conv.rows, 16u);
  EXPECT_EQ(conv.cols, 72u);
  EXPECT_EQ(view_spec(conv), "0,1");
  EXPECT_THROW(parse_view("2,3", {16, 8, 3, 3}), Error);
  EXPECT_THROW(parse_view("x", {16, 8}), Error);
  const View2D scalar = default_view({});
  EXPECT_EQ(scalar.slices * scalar.rows * scalar.cols, 1u);
}

class PyramidOverTensor : public ::testing::TestWithParam<DType> {};

TEST_P(PyramidOverTensor, EveryTileEqualsItsElementsAndTheTopEqualsTheGlobalStatistics) {
  const DType dtype = GetParam();
  const std::vector<uint64_t> shape = {3, 300, 700};  // partial edge tiles in both directions
  const uint64_t n = 3 * 300 * 700;
  const std::vector<uint8_t> raw = test::salted_data(dtype, n, 42);
  std::vector<double> values(n);
  decode_to_double(dtype, raw.data(), n, values.data());
  const View2D view = default_view(shape);
  const Pyramid p = build_pyramid(dtype, view, raw.data(), cpu_tiles(dtype));

  // Fed in odd pieces: bit-identical tiles.
  PyramidBuilder pieces(dtype, view, cpu_tiles(dtype));
  const size_t w = dtype_size(dtype);
  test::feed_in_odd_pieces(raw.data(), n, w, 5000, [&](const uint8_t* p, uint64_t k) { pieces.feed(p, k); });
  // Pattern tiles count every element's bit pattern: the counts the statistics would have made.
  if (const std::vector<uint64_t>* counts = pieces.pattern_counts()) {
    std::vector<uint64_t> direct_counts(counts->size(), 0);
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t pattern = 0;
      std::memcpy(&pattern, raw.data() + i * w, w);
      ++direct_counts[pattern];
    }
    EXPECT_EQ(*counts, direct_counts);
  } else {
    EXPECT_TRUE(dtype_is_float(dtype) ? w > 2 : w > 1) << "8- and 16-bit floats and 8-bit integers count patterns";
  }
  const Pyramid q = pieces.finish();
  ASSERT_EQ(p.tiles.size(), q.tiles.size());
  for (size_t i = 0; i < p.tiles.size(); ++i) ASSERT_EQ(encode_tile(p.tiles[i]), encode_tile(q.tiles[i])) << "tile " << i;

  ASSERT_FALSE(p.edges.empty());
  for (unsigned level = 0; level < p.layout.levels.size(); ++level)
    for (uint64_t s = 0; s < view.slices; ++s)
      for (uint64_t ty = 0; ty < p.layout.levels[level].rows; ++ty)
        for (uint64_t tx = 0; tx < p.layout.levels[level].cols; ++tx)
          expect_tile(direct(values, view, s, p.layout.range(level, ty, tx), p.edges), p.tile(level, s, ty, tx),
                      "level " + std::to_string(level) + " slice " + std::to_string(s) + " tile " + std::to_string(ty) +
                          "," + std::to_string(tx));

  // The top of the pyramid (all slices) against the engine's global statistics.
  auto registry = test::make_registry(false);
  CostModel costs;
  Planner planner{*registry, costs, {}};
  StatsOptions o;
  o.histogram = false;
  o.quantiles = false;
  const StatsResult global = compute_stats(raw.data(), dtype, n, planner, o);
  const TileStats top = p.summary();
  EXPECT_EQ(top.count, global.moments.count);
  EXPECT_EQ(top.nan, global.moments.nan_count);
  EXPECT_EQ(top.inf, global.moments.inf_count);
  EXPECT_EQ(top.zero, global.moments.zero_count);
  EXPECT_EQ(top.finite(), global.moments.finite_count);
  EXPECT_EQ(bits_of(top.min), bits_of(global.moments.min));
  EXPECT_EQ(bits_of(top.max), bits_of(global.moments.max));
  EXPECT_EQ(bits_of(top.abs_max), bits_of(global.moments.abs_max));
  EXPECT_NEAR(top.mean(), global.moments.mean, 1e-9 * std::max(1.0, std::fabs(global.moments.mean)));
  EXPECT_NEAR(top.std_dev(), global.moments.std, 1e-9 * std::max(1.0, global.moments.std));
  uint64_t hist_total = 0;
  for (uint64_t c : top.hist) hist_total += c;
  EXPECT_EQ(hist_total, top.finite());
  EXPECT_EQ(p.edges.front(), top.min);
  EXPECT_EQ(p.edges.back(), top.max);
  EXPECT_LE(p.edges.size(), 33u);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PyramidOverTensor,
                         ::testing::Values(DType::BF16, DType::F16, DType::F32, DType::F64, DType::F8_E4M3FN, DType::I8,
                                           DType::I32, DType::U16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The SIMD tile kernels against the float64 reference, tile for tile at every level: counts, extremes,
// histograms and edges identical, sum and m2 to float64 rounding. Data: the salted values (NaN, Inf,
// zeros, extremes) and normal weights, and values far from zero with a small spread (where m2 is all
// cancellation); shapes with partial tiles, rows that are no multiple of 16, and a vector.
class PyramidKernelsAgree : public ::testing::TestWithParam<DType> {};

// The IEEE binary16 bits nearest to f (ties to even; subnormals, overflow to infinity, NaN kept a NaN). Written
// out because clang 14 has no _Float16 on x86-64 (the ASan preset builds with it).
uint16_t f16_bits(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | 0x7c00u | (ax > 0x7f800000u ? 0x0200u : 0u);
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // 65520 and above round to infinity
  if (ax < 0x38800000u)                          // below 2^-14: a subnormal, in units of 2^-24 (exact scaling)
    return sign | static_cast<uint16_t>(std::nearbyint(std::bit_cast<float>(ax) * 16777216.0f));
  uint32_t h = ((((ax >> 23) - 127u + 15u)) << 10) | ((ax & 0x7fffffu) >> 13);
  const uint32_t rest = ax & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is still right
  return static_cast<uint16_t>(sign | h);
}

// n normal values of dtype (f64, f32, f16 or bf16; bf16 truncates the f32).
std::vector<uint8_t> offset_data(DType dtype, uint64_t n, double centre, double spread, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(centre, spread);
  const size_t w = dtype_size(dtype);
  std::vector<uint8_t> out(n * w);
  for (uint64_t i = 0; i < n; ++i) {
    const double x = normal(rng);
    const float f = static_cast<float>(x);
    const uint16_t h = f16_bits(f);
    const uint16_t top = static_cast<uint16_t>(std::bit_cast<uint32_t>(f) >> 16);
    if (dtype == DType::F64) std::memcpy(&out[i * w], &x, w);
    else if (dtype == DType::F32) std::memcpy(&out[i * w], &f, w);
    else if (dtype == DType::F16) std::memcpy(&out[i * w], &h, w);
    else std::memcpy(&out[i * w], &top, w);
  }
  return out;
}

TEST_P(PyramidKernelsAgree, SimdTilesEqualTheScalarReference) {
  const DType dtype = GetParam();
  struct Case {
    std::vector<uint64_t> shape;
    std::vector<uint8_t> raw;
  };
  std::vector<Case> cases;
  cases.push_back({{3, 300, 700}, test::salted_data(dtype, 3 * 300 * 700, 7)});
  cases.push_back({{513, 269}, test::salted_data(dtype, 513 * 269, 8)});
  cases.push_back({{100003}, test::salted_data(dtype, 100003, 9)});
  if (dtype_is_float(dtype) && dtype_size(dtype) >= 2) {
    cases.push_back({{260, 1000}, offset_data(dtype, 260 * 1000, 1000.0, 0.5, 10)});
    cases.push_back({{300, 512}, offset_data(dtype, 300 * 512, 0.0, 0.02, 11)});
    cases.push_back({{64, 4100}, offset_data(dtype, 64 * 4100, -3.0, 1e-3, 12)});
    // A first value far from the rest: sums about it would cancel. The pattern tiles sum again about the
    // mean; the segment kernels shift by the first segment's mean, which the outlier moves little.
    Case outlier{{300, 600}, offset_data(dtype, 300 * 600, 1.0, 0.01, 13)};
    const std::vector<uint8_t> big = offset_data(dtype, 1, 1e4, 0.0, 14);
    std::copy(big.begin(), big.end(), outlier.raw.begin());
    cases.push_back(outlier);
  }
  for (const Case& c : cases) {
    const View2D view = default_view(c.shape);
    const Pyramid ref = build_pyramid(dtype, view, c.raw.data(), cpu_tiles(dtype), TileKernels::Scalar);
    for (TileKernels kernels : {TileKernels::Simd, TileKernels::Segments}) {
      const std::string how = kernels == TileKernels::Simd ? "simd" : "segments";
      const Pyramid simd = build_pyramid(dtype, view, c.raw.data(), cpu_tiles(dtype), kernels);
      ASSERT_EQ(simd.tiles.size(), ref.tiles.size()) << how;
      ASSERT_EQ(simd.edges.size(), ref.edges.size()) << how;
      for (size_t i = 0; i < ref.edges.size(); ++i)
        EXPECT_EQ(bits_of(simd.edges[i]), bits_of(ref.edges[i])) << how << " edge " << i;
      for (size_t i = 0; i < ref.tiles.size(); ++i)
        expect_tile(ref.tiles[i], simd.tiles[i], how + " shape " + std::to_string(c.shape[0]) + " tile " + std::to_string(i));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryDtype, PyramidKernelsAgree,
                         ::testing::Values(DType::BF16, DType::F16, DType::F32, DType::F64, DType::F8_E4M3FN,
                                           DType::F8_E5M2, DType::I8, DType::I16, DType::I32, DType::I64, DType::U8,
                                           DType::U16, DType::U32, DType::U64, DType::BOOL),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Indexing hands the pyramid's pattern counts to the statistics: the same statistics, bit for bit, as
// counting them in the statistics pass, and the placement report says where the counts came from.
TEST(Pyramid, StatisticsFromThePyramidsPatternCountsEqualTheirOwn) {
  for (DType dtype : {DType::BF16, DType::F16, DType::F8_E5M2, DType::I8}) {
    const std::vector<uint64_t> shape = {700, 300};
    const uint64_t n = 700 * 300;
    const std::vector<uint8_t> raw = test::salted_data(dtype, n, 5);
    auto registry = test::make_registry(false);
    CostModel costs;
    Planner planner{*registry, costs, {}};
    StatsOptions o;
    o.probabilities = {0.0, 0.001, 0.5, 0.999, 1.0};
    StatsStream own(planner, dtype, n, o);
    own.feed(raw.data(), n);
    const StatsResult want = own.finish(nullptr);

    StatsStream shared(planner, dtype, n, o);
    PyramidBuilder lod(dtype, default_view(shape), cpu_tiles(dtype));
    ASSERT_NE(lod.pattern_counts(), nullptr) << dtype_name(dtype);
    ASSERT_TRUE(shared.count_patterns_elsewhere("counted_by_pyramid_pass"));
    const uint64_t half = n / 2 + 123;
    shared.feed(raw.data(), half);
    lod.feed(raw.data(), half);
    shared.feed(raw.data() + half * dtype_size(dtype), n - half);
    lod.feed(raw.data() + half * dtype_size(dtype), n - half);
    shared.add_pattern_counts(*lod.pattern_counts());
    const StatsResult got = shared.finish(nullptr);
    ASSERT_TRUE(want.histogram && got.histogram);
    EXPECT_EQ(want.histogram->counts, got.histogram->counts) << dtype_name(dtype);
    EXPECT_EQ(want.histogram->edges, got.histogram->edges) << dtype_name(dtype);
    ASSERT_EQ(want.quantiles.size(), got.quantiles.size());
    for (size_t i = 0; i < want.quantiles.size(); ++i)
      EXPECT_EQ(bits_of(want.quantiles[i].value), bits_of(got.quantiles[i].value)) << dtype_name(dtype) << " q" << i;
    EXPECT_EQ(bits_of(want.moments.std), bits_of(got.moments.std));
    bool reported = false;
    for (const Placement& pl : got.placement) reported |= pl.reason == "counted_by_pyramid_pass";
    EXPECT_TRUE(reported) << dtype_name(dtype);
  }
}

TEST(Pyramid, PatternCountsMadeElsewhereMustArrive) {
  const std::vector<uint8_t> raw = test::salted_data(DType::BF16, 1000, 6);
  auto registry = test::make_registry(false);
  CostModel costs;
  Planner planner{*registry, costs, {}};
  StatsStream stream(planner, DType::BF16, 1000, StatsOptions{});
  ASSERT_TRUE(stream.count_patterns_elsewhere("counted_by_pyramid_pass"));
  stream.feed(raw.data(), 1000);
  EXPECT_THROW(stream.add_pattern_counts(std::vector<uint64_t>(256, 0)), Error);  // wrong size
  EXPECT_THROW(stream.finish(nullptr), Error);
}

TEST(Pyramid, AllNanTensorHasNoBinsAndEmptyRanges) {
  std::vector<float> v(1000, std::nanf(""));
  const Pyramid p = build_pyramid(DType::F32, default_view({1000}), v.data(), cpu_tiles(DType::F32));
  EXPECT_TRUE(p.edges.empty());
  const TileStats top = p.summary();
  EXPECT_EQ(top.nan, 1000u);
  EXPECT_EQ(top.finite(), 0u);
  EXPECT_TRUE(std::isinf(top.min));
}

TEST(Pyramid, OneOutlierReachesTheTop) {
  std::vector<float> v(1024 * 1024, 0.5f);
  v[777 * 1024 + 333] = 1e6f;
  const Pyramid p = build_pyramid(DType::F32, default_view({1024, 1024}), v.data(), cpu_tiles(DType::F32));
  const unsigned top = static_cast<unsigned>(p.layout.levels.size() - 1);
  EXPECT_EQ(p.tile(top, 0, 0, 0).max, 1e6);
  EXPECT_EQ(p.tile(0, 0, 3, 1).max, 1e6);  // row 777 / 256 = 3, col 333 / 256 = 1
  EXPECT_EQ(p.tile(0, 0, 3, 2).max, 0.5);
}

TEST(Pyramid, FeedingTooMuchOrTooLittleIsRefused) {
  std::vector<float> v(10, 1.0f);
  PyramidBuilder b(DType::F32, default_view({8}), cpu_tiles(DType::F32));
  EXPECT_THROW(b.feed(v.data(), 10), Error);
  b.feed(v.data(), 7);
  EXPECT_THROW(b.finish(), Error);
}

TEST(Pyramid, DamagedTileRecordIsBadInput) {
  TileStats t;
  t.count = 4;
  t.hist = {1, 2, 1};
  auto rec = encode_tile(t);
  EXPECT_NO_THROW(decode_tile(rec.data(), rec.size(), 3, "x"));
  try {
    decode_tile(rec.data(), rec.size() - 1, 3, "db: tile 0/0/0/0 of w");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("tile 0/0/0/0 of w"), std::string::npos) << e.what();
  }
  t.nan = 5;  // more NaNs than elements
  rec = encode_tile(t);
  EXPECT_THROW(decode_tile(rec.data(), rec.size(), 3, "x"), Error);
}

}  // namespace
}  // namespace tmorph
