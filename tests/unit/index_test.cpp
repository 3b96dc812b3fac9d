// StatsStream fed in pieces equals one call; the checkpoint index stores and returns statistics
// exactly (NaN included); indexing commits every tensor; a shrunk file is a named error, not SIGBUS.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/mapped_file.h"
#include "index/checkpoint_index.h"
#include "index/indexer.h"
#include "index/read_pacer.h"
#include "tensormorph/error.h"
#include "tensormorph/stats.h"
#include "test_support.h"

namespace tmorph {
namespace {

namespace fs = std::filesystem;

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void expect_same(const StatsResult& a, const StatsResult& b) {
  EXPECT_EQ(a.moments.count, b.moments.count);
  EXPECT_EQ(a.moments.nan_count, b.moments.nan_count);
  EXPECT_EQ(a.moments.inf_count, b.moments.inf_count);
  EXPECT_EQ(a.moments.zero_count, b.moments.zero_count);
  for (auto [x, y] : {std::pair{a.moments.min, b.moments.min}, {a.moments.max, b.moments.max}, {a.moments.sum, b.moments.sum},
                      {a.moments.mean, b.moments.mean}, {a.moments.std, b.moments.std}, {a.moments.abs_max, b.moments.abs_max}})
    EXPECT_TRUE(same_bits(x, y) || (std::isnan(x) && std::isnan(y))) << x << " vs " << y;
  ASSERT_EQ(a.histogram.has_value(), b.histogram.has_value());
  if (a.histogram) {
    EXPECT_EQ(a.histogram->edges, b.histogram->edges);
    EXPECT_EQ(a.histogram->counts, b.histogram->counts);
    EXPECT_EQ(a.histogram->below, b.histogram->below);
  }
  ASSERT_EQ(a.quantiles.size(), b.quantiles.size());
  for (size_t i = 0; i < a.quantiles.size(); ++i)
    EXPECT_TRUE(same_bits(a.quantiles[i].value, b.quantiles[i].value) ||
                (std::isnan(a.quantiles[i].value) && std::isnan(b.quantiles[i].value)));
  EXPECT_EQ(a.quantile_method, b.quantile_method);
}

class StatsStreamPieces : public ::testing::TestWithParam<DType> {};

TEST_P(StatsStreamPieces, PiecesOfAnySizeGiveTheResultOfOneCall) {
  const DType dt = GetParam();
  const uint64_t n = 3 * TM_STATS_BLOCK_ELEMENTS + 777;
  const auto raw = test::salted_data(dt, n, 7);
  auto reg = test::make_registry(false);
  CostModel costs;
  Planner planner(*reg, costs, {});
  StatsOptions opt;
  opt.threads = 1;
  const StatsResult whole = compute_stats(raw.data(), dt, n, planner, opt);
  StatsStream s(planner, dt, n, opt);
  EXPECT_EQ(s.needs_second_pass(), dtype_size(dt) > 2);
  const size_t w = dtype_size(dt);
  for (uint64_t off = 0, piece = 1; off < n; piece = piece * 3 + 11) {
    const uint64_t k = std::min(piece, n - off);
    s.feed(raw.data() + off * w, k);
    off += k;
  }
  expect_same(s.finish(raw.data()), whole);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, StatsStreamPieces, ::testing::Values(DType::BF16, DType::F16, DType::F8_E4M3FN, DType::U8,
                                                                      DType::F32, DType::I32));

// A directory with one safetensors file of two tensors: f32 with NaNs/Infs and bf16.
class IndexFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tm-index-test-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::vector<uint8_t> a = test::salted_data(DType::F32, 5000, 1), b = test::salted_data(DType::BF16, 3000, 2);
    const std::string header = R"({"a":{"dtype":"F32","shape":[50,100],"data_offsets":[0,20000]},)"
                               R"("b":{"dtype":"BF16","shape":[3000],"data_offsets":[20000,26000]}})";
    file_ = (dir_ / "m.safetensors").string();
    std::ofstream f(file_, std::ios::binary);
    const uint64_t len = header.size();
    f.write(reinterpret_cast<const char*>(&len), 8);
    f << header;
    f.write(reinterpret_cast<const char*>(a.data()), static_cast<std::streamsize>(a.size()));
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    data_a_ = a, data_b_ = b;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  std::string file_;
  std::vector<uint8_t> data_a_, data_b_;
};

TEST_F(IndexFixture, IndexingStoresExactlyWhatComputeStatsGives) {
  auto reg = test::make_registry(false);
  CostModel costs;
  Planner planner(*reg, costs, {});
  const std::string db = (dir_ / "i.sqlite").string();
  {
    CheckpointIndex index(file_, db);
    EXPECT_FALSE(index.report().reused);
    IndexingOptions opt;
    opt.threads = 2;
    const IndexingReport r = index_checkpoint(index, planner, opt);
    EXPECT_EQ(r.computed, 2u);
    EXPECT_EQ(r.bytes, 26000u);
  }
  CheckpointIndex again(file_, db);
  EXPECT_TRUE(again.report().reused);
  ASSERT_EQ(again.checkpoint().tensors.size(), 2u);
  EXPECT_EQ(again.checkpoint().tensors[0].shape, (std::vector<uint64_t>{50, 100}));
  StatsOptions o = CheckpointIndex::index_options();
  o.threads = 1;
  expect_same(*again.load_stats(0), compute_stats(data_a_.data(), DType::F32, 5000, planner, o));
  expect_same(*again.load_stats(1), compute_stats(data_b_.data(), DType::BF16, 3000, planner, o));
}

// 1,000 bytes/s: ahead of schedule it waits; after a 9.5 s stall it may catch up by one second's worth only.
TEST(ReadPacer, WaitsWhenAheadAndCatchesUpAtMostOneSecond) {
  ReadPacer p(1000);
  EXPECT_DOUBLE_EQ(p.wait(0, 0), 0);
  EXPECT_DOUBLE_EQ(p.wait(0, 500), 0.5);
  EXPECT_LT(p.wait(10, 500), 0);               // 9.5 s behind: the origin moves to 9 s
  EXPECT_DOUBLE_EQ(p.wait(10, 1500), 0);       // one second's worth read at once
  EXPECT_DOUBLE_EQ(p.wait(10, 2500), 1.0);     // then back to 1,000 bytes/s
}

// One worker, 40,000 bytes/s: tensor a (20,000 bytes) is taken at once, b only after 0.5 s.
TEST_F(IndexFixture, AReadRateLimitSpacesTheTensors) {
  auto reg = test::make_registry(false);
  CostModel costs;
  Planner planner(*reg, costs, {});
  CheckpointIndex index(file_, (dir_ / "r.sqlite").string());
  IndexingOptions opt;
  opt.threads = 1;
  opt.max_bytes_per_s = 40000;
  const IndexingReport r = index_checkpoint(index, planner, opt);
  EXPECT_EQ(r.computed, 2u);
  EXPECT_GE(r.seconds, 0.5);
  EXPECT_LT(r.seconds, 30.0);
}

// Waiting for the rate limit watches `cancel`: the run returns soon, with what it committed.
TEST_F(IndexFixture, CancellingWhileRateLimitedReturnsPromptly) {
  auto reg = test::make_registry(false);
  CostModel costs;
  Planner planner(*reg, costs, {});
  CheckpointIndex index(file_, (dir_ / "c.sqlite").string());
  std::atomic<bool> cancel{false};
  IndexingOptions opt;
  opt.threads = 1;
  opt.max_bytes_per_s = 100;  // b would wait 200 s
  opt.cancel = &cancel;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  const IndexingReport r = index_checkpoint(index, planner, opt);
  stopper.join();
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.computed, 1u);
  EXPECT_TRUE(index.has_stats(0));
  EXPECT_FALSE(index.has_stats(1));
  EXPECT_LT(r.seconds, 10.0);
}

TEST_F(IndexFixture, NanStatisticsRoundTrip) {
  const std::string db = (dir_ / "n.sqlite").string();
  CheckpointIndex index(file_, db);
  StatsResult r;
  r.moments.count = 4, r.moments.nan_count = 4;
  r.moments.min = r.moments.max = r.moments.mean = std::nan("");
  r.quantiles.push_back({0.5, std::nan(""), std::nan(""), std::nan(""), 0});
  r.quantile_method = "radix_select";
  index.store_stats(0, r, 0.0);
  const auto back = index.load_stats(0);
  ASSERT_TRUE(back);
  EXPECT_TRUE(std::isnan(back->moments.min));
  EXPECT_TRUE(std::isnan(back->quantiles[0].value));
  EXPECT_EQ(back->moments.nan_count, 4u);
}

TEST_F(IndexFixture, ReadingAShrunkFileNamesTheOffset) {
  MappedFile f(file_);
  ASSERT_EQ(::truncate(file_.c_str(), 1000), 0);
  std::vector<uint8_t> buf(4096);
  try {
    f.read_at(0, buf.data(), buf.size());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("offset 1000"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("m.safetensors"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tmorph
