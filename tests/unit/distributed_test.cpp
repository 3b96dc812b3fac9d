// Work across MPI ranks, the parts that need no second process: the plan that splits tensors between ranks, the
// bytes a rank sends rank 0 for one tensor (lossless, and refused cleanly when damaged), and the registry of rank
// services (tag ranges disjoint, checked when a protocol registers). The ranks themselves run in
// tests/cli/test_mpi.py under mpirun.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <random>
#include <vector>

#include "app/rank_worker.h"
#include "distributed/rank_exchange.h"
#include "distributed/rank_services.h"
#include "distributed/wire.h"
#include "index/rank_plan.h"
#include "index/tensor_result_codec.h"
#include "lod/pyramid.h"
#include "ops/tile_stats.h"
#include "test_support.h"
#include "tensormorph/error.h"
#include "tensormorph/stats.h"

namespace tmorph {
namespace {

uint64_t largest_run(const std::vector<uint64_t>& bytes, const std::vector<std::vector<size_t>>& plan) {
  uint64_t worst = 0;
  for (const auto& run : plan) {
    uint64_t load = 0;
    for (size_t i : run) load += std::max<uint64_t>(bytes[i], 1);
    worst = std::max(worst, load);
  }
  return worst;
}

// The smallest largest-run of any split into `ranks` contiguous runs, by exhaustive search.
uint64_t best_contiguous(const std::vector<uint64_t>& bytes, size_t from, int ranks) {
  uint64_t rest = 0;
  for (size_t i = from; i < bytes.size(); ++i) rest += std::max<uint64_t>(bytes[i], 1);
  if (ranks == 1 || from == bytes.size()) return rest;
  uint64_t best = rest, load = 0;
  for (size_t end = from; end < bytes.size(); ++end) {
    load += std::max<uint64_t>(bytes[end], 1);
    best = std::min(best, std::max(load, best_contiguous(bytes, end + 1, ranks - 1)));
  }
  return best;
}

void expect_contiguous_cover(const std::vector<std::vector<size_t>>& plan, size_t n) {
  size_t next = 0;
  for (const auto& run : plan)
    for (size_t i : run) EXPECT_EQ(i, next++);
  EXPECT_EQ(next, n);
}

TEST(RankPlan, ContiguousAndAsBalancedAsAnyContiguousSplit) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 1 + rng() % 9;
    const int ranks = 1 + static_cast<int>(rng() % 4);
    std::vector<uint64_t> bytes(n);
    for (auto& b : bytes) b = rng() % 5 == 0 ? rng() % 100000 : rng() % 1000;
    const auto plan = plan_ranks(bytes, ranks);
    ASSERT_EQ(plan.size(), static_cast<size_t>(ranks));
    expect_contiguous_cover(plan, n);
    EXPECT_EQ(largest_run(bytes, plan), best_contiguous(bytes, 0, ranks)) << "trial " << trial;
    EXPECT_EQ(plan, plan_ranks(bytes, ranks)) << "deterministic";
    // Every rank works while there are tensors enough.
    if (n >= static_cast<size_t>(ranks)) {
      for (const auto& run : plan) EXPECT_FALSE(run.empty()) << "trial " << trial;
    }
  }
}

TEST(RankPlan, OneHugeTensorGetsARankOfItsOwn) {
  std::vector<uint64_t> bytes(40, 1000);
  bytes[17] = 1000000;  // more than the other 39 together
  const auto plan = plan_ranks(bytes, 3);
  expect_contiguous_cover(plan, bytes.size());
  const auto with_huge = std::find_if(plan.begin(), plan.end(), [](const auto& run) {
    return std::find(run.begin(), run.end(), size_t{17}) != run.end();
  });
  ASSERT_NE(with_huge, plan.end());
  EXPECT_EQ(largest_run(bytes, plan), 1000000u + (with_huge->size() - 1) * 1000u);
  EXPECT_EQ(largest_run(bytes, plan), best_contiguous(bytes, 0, 3));
}

TEST(RankPlan, EdgeCases) {
  EXPECT_EQ(plan_ranks({}, 3), std::vector<std::vector<size_t>>(3));
  const auto few = plan_ranks({5, 5}, 4);  // fewer tensors than ranks: two ranks idle
  expect_contiguous_cover(few, 2);
  EXPECT_EQ(std::count_if(few.begin(), few.end(), [](const auto& r) { return r.empty(); }), 2);
  const auto empties = plan_ranks({0, 0, 0, 0}, 2);  // zero-byte tensors still spread
  EXPECT_EQ(empties[0].size(), 2u);
  EXPECT_EQ(empties[1].size(), 2u);
  const auto one = plan_ranks({1, 2, 3}, 1);
  EXPECT_EQ(one[0], (std::vector<size_t>{0, 1, 2}));
  const uint64_t big = std::numeric_limits<uint64_t>::max() / 4;  // totals near 2^64 do not wrap
  const auto huge = plan_ranks({big, big, big}, 2);
  expect_contiguous_cover(huge, 3);
  EXPECT_EQ(largest_run({big, big, big}, huge), 2 * big);
}

// A real result: bf16 values with NaN, Inf and zeros, statistics with histogram and quantiles, and the
// pyramid of a [300, 700] view (several tiles and levels).
TensorResult sample_result() {
  const uint64_t rows = 300, cols = 700, n = rows * cols;
  std::vector<uint16_t> raw(n);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (uint64_t i = 0; i < n; ++i) {
    float v = normal(rng);
    if (i % 997 == 0) v = std::nanf("");
    if (i % 1499 == 0) v = -INFINITY;
    if (i % 101 == 0) v = 0;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    raw[i] = static_cast<uint16_t>(bits >> 16);
  }
  auto registry = test::make_registry(false);
  CostModel costs;
  Planner planner{*registry, costs, {}};
  TensorResult r;
  r.tensor = 12;
  r.seconds = 0.125;
  r.stats = compute_stats(raw.data(), DType::BF16, n, planner, StatsOptions{});
  PyramidBuilder lod(DType::BF16, default_view({rows, cols}), PlacedTileStats(planner, DType::BF16, n, 0, 1));
  lod.feed(raw.data(), n);
  r.pyramid = lod.finish();
  return r;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(TensorResultCodec, RoundTripIsLossless) {
  const TensorResult r = sample_result();
  ASSERT_FALSE(r.stats.placement.empty());
  ASSERT_TRUE(r.stats.histogram);
  const TensorResult back = decode_tensor_result(encode_tensor_result(r), "test");
  EXPECT_EQ(back.tensor, r.tensor);
  EXPECT_EQ(back.seconds, r.seconds);
  const auto& m = r.stats.moments;
  const auto& b = back.stats.moments;
  EXPECT_EQ(b.count, m.count);
  EXPECT_EQ(b.nan_count, m.nan_count);
  EXPECT_EQ(b.inf_count, m.inf_count);
  EXPECT_EQ(b.zero_count, m.zero_count);
  for (auto [x, y] : {std::pair{b.min, m.min}, {b.max, m.max}, {b.abs_max, m.abs_max}, {b.sum, m.sum}, {b.mean, m.mean}, {b.std, m.std}})
    EXPECT_TRUE(same_bits(x, y)) << x << " vs " << y;
  EXPECT_EQ(back.stats.histogram->edges, r.stats.histogram->edges);
  EXPECT_EQ(back.stats.histogram->counts, r.stats.histogram->counts);
  ASSERT_EQ(back.stats.quantiles.size(), r.stats.quantiles.size());
  for (size_t k = 0; k < r.stats.quantiles.size(); ++k) EXPECT_TRUE(same_bits(back.stats.quantiles[k].value, r.stats.quantiles[k].value));
  EXPECT_EQ(back.stats.quantile_method, r.stats.quantile_method);
  ASSERT_EQ(back.stats.placement.size(), r.stats.placement.size());
  for (size_t k = 0; k < r.stats.placement.size(); ++k) {
    EXPECT_EQ(back.stats.placement[k].op, r.stats.placement[k].op);
    EXPECT_EQ(back.stats.placement[k].backend, r.stats.placement[k].backend);
  }
  ASSERT_TRUE(back.pyramid);
  EXPECT_EQ(back.pyramid->layout.view, r.pyramid->layout.view);
  EXPECT_EQ(back.pyramid->edges, r.pyramid->edges);
  ASSERT_EQ(back.pyramid->tiles.size(), r.pyramid->tiles.size());
  for (size_t k = 0; k < r.pyramid->tiles.size(); ++k)
    EXPECT_EQ(encode_tile(back.pyramid->tiles[k]), encode_tile(r.pyramid->tiles[k])) << "tile " << k;
  // Without a pyramid.
  TensorResult bare = r;
  bare.pyramid.reset();
  EXPECT_FALSE(decode_tensor_result(encode_tensor_result(bare), "test").pyramid);
}

TEST(TensorResultCodec, DamagedMessagesAreRefusedWithTheOffset) {
  TensorResult r = sample_result();
  const std::vector<uint8_t> whole = encode_tensor_result(r);
  // Every truncation point in the header, statistics and first tiles, then a sample of the rest.
  for (size_t cut = 0; cut < whole.size(); cut += cut < 4000 ? 1 : 997) {
    const std::vector<uint8_t> part(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(cut));
    try {
      decode_tensor_result(part, "result from rank 1");
      FAIL() << "a message cut at " << cut << " bytes was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput);
      EXPECT_NE(std::string(e.what()).find("result from rank 1"), std::string::npos) << e.what();
    }
  }
  std::vector<uint8_t> longer = whole;
  longer.push_back(0);
  EXPECT_THROW(decode_tensor_result(longer, "x"), Error);
  std::vector<uint8_t> magic = whole;
  magic[0] ^= 1;
  EXPECT_THROW(decode_tensor_result(magic, "x"), Error);
  // A pyramid whose tile count does not match its view.
  r.pyramid->tiles.pop_back();
  try {
    decode_tensor_result(encode_tensor_result(r), "result from rank 2");
    FAIL() << "a pyramid short of one tile was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pyramid tiles"), std::string::npos) << e.what();
  }
}

TEST(Wire, LengthsBeyondTheMessageAreRefusedBeforeAllocating) {
  WireWriter w;
  w.put<uint64_t>(uint64_t{1} << 60);  // a vector "of 2^60 doubles" in an 8-byte message
  const std::vector<uint8_t> bytes = w.bytes();
  WireReader in(bytes, "probe");
  EXPECT_THROW(in.get_vector<double>(), Error);
  WireReader strings(bytes, "probe");
  EXPECT_THROW(strings.get_string(), Error);
}

RankService service(const char* name, int first, int last, int request) {
  return {RankProtocol{name, first, last}, request, [](const RankMessage&, World&) {}};
}

std::string refusal(RankServiceRegistry& r, RankService s) {
  try {
    r.add(std::move(s));
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Internal);
    return e.what();
  }
  return "";
}

TEST(RankServices, OverlappingOrMalformedRangesAreRefusedNamingThem) {
  RankServiceRegistry r;
  r.add(service("first", 16, 20, 16));
  r.add(service("second", 21, 23, 21));
  EXPECT_EQ(refusal(r, service("third", 23, 30, 24)), "rank protocol 'third' (tags 23..30) overlaps 'second' (tags 21..23)");
  EXPECT_EQ(refusal(r, service("inside", 17, 18, 17)), "rank protocol 'inside' (tags 17..18) overlaps 'first' (tags 16..20)");
  EXPECT_NE(refusal(r, service("low", 1, 3, 1)).find("from 16 up"), std::string::npos);  // the world's own tags
  EXPECT_NE(refusal(r, service("empty", 40, 39, 40)).find("from 16 up"), std::string::npos);
  EXPECT_NE(refusal(r, service("stray", 40, 42, 43)).find("request tag 43 is outside its range"), std::string::npos);
  EXPECT_NE(refusal(r, {RankProtocol{"mute", 50, 51}, 50, nullptr}).find("no handler"), std::string::npos);
  ASSERT_EQ(r.services().size(), 2u);  // nothing refused was kept
  ASSERT_NE(r.find(21), nullptr);
  EXPECT_STREQ(r.find(21)->protocol.name, "second");
  EXPECT_EQ(r.find(17), nullptr);  // a tag of a range that is no request
}

// The protocols the worker ranks serve register without overlapping, each with its documented range (the tags on
// the wire are unchanged: docs/scaling.md and the protocols' headers name them).
TEST(RankServices, TheProtocolsServedByOtherRanksHaveDisjointRanges) {
  const IndexingOptions indexing;
  const RankServiceRegistry r = app::rank_services(test::cpu_planner(), indexing, 1, 0);
  ASSERT_EQ(r.services().size(), 3u);
  std::vector<std::array<int, 3>> ranges;
  for (const RankService& s : r.services()) ranges.push_back({s.protocol.first_tag, s.protocol.last_tag, s.request_tag});
  EXPECT_EQ(ranges, (std::vector<std::array<int, 3>>{{16, 20, 16}, {32, 34, 32}, {40, 43, 40}}));
}

// One process is a world of one: the exchange refuses tags outside its protocol before anything is sent.
TEST(RankExchange, TagsOutsideTheProtocolAreRefused) {
  World& world = World::instance();
  const RankProtocol p{"test", 60, 62};
  EXPECT_THROW(RankExchange(world, p, 59, 62), Error);
  EXPECT_THROW(RankExchange(world, p, 60, 63), Error);
  const RankExchange e(world, p, 60, 62);
  try {
    e.reply(70, {});
    FAIL();
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::Internal);
    EXPECT_NE(std::string(err.what()).find("tag 70 is not one of protocol 'test' (60..62)"), std::string::npos) << err.what();
  }
  int asked = 0;
  e.scatter(1, [&](int) { return std::vector<uint8_t>{}; }, [&](int) { ++asked; });  // a world of one: nobody to ask
  EXPECT_EQ(asked, 0);
}

}  // namespace
}  // namespace tmorph
