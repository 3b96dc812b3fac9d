// The resident copy of an acquisition (stem/resident/, stem/products/resident_products.h): its compact form against
// the dense frames (every dtype, masks, annuli, centre of mass, patterns, frames), and products from it against the
// streamed products bit for bit; eviction under a small budget (reported, results unchanged); two clients sharing
// one copy; a damaged chunk met while building (the error names the frame, nothing stays resident).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

#include "stem/acquisition.h"
#include "stem/demo/simulate.h"
#include "stem/products/products.h"
#include "stem/products/virtual_detector.h"
#include "stem/resident/compact_frames.h"
#include "stem/resident/resident_store.h"
#include "compact_sums_support.h"
#include "stem_fixture.h"
#include "tensormorph/error.h"
#include "test_support.h"

namespace tmorph {
namespace {

using test::TempFolder;

// Dense reference sums over uint64 frames.
uint64_t dense_sum(const std::vector<uint64_t>& frame, const std::vector<uint32_t>& pixels) {
  uint64_t s = 0;
  for (uint32_t p : pixels) s += frame[p];
  return s;
}

std::vector<uint64_t> frame_values(const std::vector<uint8_t>& raw, DType dtype, uint64_t f, uint64_t pixels) {
  std::vector<uint64_t> v(pixels);
  for (uint64_t p = 0; p < pixels; ++p) std::memcpy(&v[p], raw.data() + (f * pixels + p) * dtype_size(dtype), dtype_size(dtype));
  return v;
}

TEST(CompactFrames, EqualTheDenseFramesForEveryDtypeInPixelAndRadialOrder) {
  const uint64_t rows = 13, cols = 11, pixels = rows * cols, frames = 23;
  for (DType dt : {DType::U8, DType::U16, DType::U32}) {
    // detector_pixels has zeros, small counts and values up to the dtype's maximum; uint32 frames are kept below
    // 2^32 per frame by using small counts only.
    std::vector<uint8_t> raw;
    for (uint64_t f = 0; f < frames; ++f) {
      std::vector<uint8_t> one = test::detector_pixels(dt == DType::U32 ? DType::U8 : dt, pixels, 40 + f);
      if (dt == DType::U32) {
        std::vector<uint8_t> wide(pixels * 4, 0);
        for (uint64_t p = 0; p < pixels; ++p) wide[p * 4] = one[p];
        one = wide;
      }
      raw.insert(raw.end(), one.begin(), one.end());
    }
    CompactFrames copy(frames, rows, cols);
    copy.append(raw.data(), 10, dt, 3);  // two appends, three threads: segments in position order
    copy.append(raw.data() + 10 * pixels * dtype_size(dt), frames - 10, dt, 2);
    ASSERT_TRUE(copy.complete());
    EXPECT_EQ(copy.dense_frame_bytes(), pixels * dtype_size(dt));
    CompactFrames mixed(2, rows, cols);
    mixed.append(raw.data(), 1, dt, 1);
    EXPECT_THROW(mixed.append(raw.data(), 1, dt == DType::U8 ? DType::U16 : DType::U8, 1), Error) << "one dtype per copy";
    const std::vector<uint32_t> mask = {0, 5, 17, 18, 19, 60, 142};
    const std::vector<uint32_t> ring = annulus_pixels(rows, cols, 6.3, 4.8, 2.0, 4.5);
    const std::vector<uint32_t> com = {3, 4, 5, 30, 31, 99};
    std::vector<uint64_t> all(frames), some = {22, 3, 7};
    std::iota(all.begin(), all.end(), 0);
    for (int order = 0; order < 2; ++order) {
      if (order == 1) copy.order_radially(6.3, 4.8, 2);
      EXPECT_EQ(copy.rank_range(ring).has_value(), order == 1);
      for (const auto* positions : {&all, &some}) {
        const auto s = copy.sums({mask, ring}, &com, true, *positions, 2);
        const auto t = copy.sums({ring}, nullptr, true, *positions, 1);
        std::vector<uint64_t> psum;
        std::vector<uint32_t> pmax;
        copy.pattern(*positions, psum, pmax, 2);
        std::vector<uint64_t> want_sum(pixels, 0), want_max(pixels, 0);
        for (size_t i = 0; i < positions->size(); ++i) {
          const uint64_t f = (*positions)[i];
          const auto v = frame_values(raw, dt, f, pixels);
          uint64_t total = 0, w = 0, r = 0, c = 0;
          for (uint64_t p = 0; p < pixels; ++p) {
            total += v[p], want_sum[p] += v[p], want_max[p] = std::max(want_max[p], v[p]);
            r += v[p] * (p / cols), c += v[p] * (p % cols);
          }
          for (uint32_t p : com) w += v[p];
          EXPECT_EQ(s.images[0][i], dense_sum(v, mask));
          EXPECT_EQ(s.images[1][i], dense_sum(v, ring)) << "order " << order;
          EXPECT_EQ(s.totals[i], total);
          EXPECT_EQ(s.com_weight[i], w);
          EXPECT_EQ(t.com_weight[i], total);
          EXPECT_EQ(t.com_row[i], r);
          EXPECT_EQ(t.com_col[i], c);
          const std::vector<uint32_t> dense = copy.frame(f);
          for (uint64_t p = 0; p < pixels; ++p) ASSERT_EQ(dense[p], v[p]);
        }
        EXPECT_EQ(psum, want_sum);
        for (uint64_t p = 0; p < pixels; ++p) EXPECT_EQ(pmax[p], want_max[p]);
      }
      EXPECT_EQ(copy.sums({ring}, nullptr, false, all, 1).evaluated_as[0], order == 1 ? "rank range" : "direct");
    }
    uint64_t nonzero = 0;
    for (uint64_t f = 0; f < frames; ++f)
      for (uint64_t v : frame_values(raw, dt, f, pixels)) nonzero += v != 0;
    EXPECT_EQ(copy.nonzeros(), nonzero);  // one entry per non-zero pixel, none for zeros
  }
}

TEST(CompactFrames, AFrameSummingTo2To32IsRefusedNamingItsPosition) {
  std::vector<uint32_t> frames(2 * 4, 0);
  frames[4] = 0xFFFFFFFFu, frames[5] = 1;  // position 1 sums to 2^32
  CompactFrames copy(2, 2, 2);
  try {
    copy.append(reinterpret_cast<const uint8_t*>(frames.data()), 2, DType::U32, 1);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("position 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(CompactFrames(3, 2, 2).append(reinterpret_cast<const uint8_t*>(frames.data()), 4, DType::U32, 1), Error);
}

TEST(CompactFrames, AnExtendedCopyAppendsInRadialOrderAndLeavesItsSourceAsItWas) {
  const uint64_t rows = 9, cols = 14, pixels = rows * cols, frames = 17;
  std::vector<uint8_t> raw;
  for (uint64_t f = 0; f < frames; ++f) {
    const std::vector<uint8_t> one = test::detector_pixels(DType::U16, pixels, 70 + f);
    raw.insert(raw.end(), one.begin(), one.end());
  }
  const uint64_t frame_bytes = pixels * 2;
  CompactFrames first(frames, rows, cols);
  first.append(raw.data(), 6, DType::U16, 2);
  first.order_radially(4.2, 6.9, 2);
  const uint64_t first_bytes = first.bytes();
  std::unique_ptr<CompactFrames> grown = first.extended();
  EXPECT_THROW(grown->order_radially(4.2, 6.9, 1), Error) << "entries shared with another copy are never reordered";
  grown->append(raw.data() + 6 * frame_bytes, 5, DType::U16, 3);
  std::unique_ptr<CompactFrames> again = grown->extended();
  again->append(raw.data() + 11 * frame_bytes, frames - 11, DType::U16, 2);
  ASSERT_TRUE(again->complete());
  EXPECT_EQ(first.appended(), 6u);
  EXPECT_EQ(first.bytes(), first_bytes);
  EXPECT_EQ(grown->appended(), 11u);
  // The same copy built in one go, then ordered: every sum, pattern and frame is the same.
  CompactFrames whole(frames, rows, cols);
  whole.append(raw.data(), frames, DType::U16, 2);
  whole.order_radially(4.2, 6.9, 2);
  const std::vector<uint32_t> ring = annulus_pixels(rows, cols, 4.2, 6.9, 1.5, 4.0), mask = {1, 2, 50, 51, 99};
  std::vector<uint64_t> all(frames);
  std::iota(all.begin(), all.end(), 0);
  const auto a = again->sums({ring, mask}, nullptr, true, all, 2), b = whole.sums({ring, mask}, nullptr, true, all, 2);
  EXPECT_EQ(a.evaluated_as[0], "rank range");
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.totals, b.totals);
  EXPECT_EQ(a.com_row, b.com_row);
  EXPECT_EQ(a.com_col, b.com_col);
  EXPECT_EQ(again->pattern_sum(), whole.pattern_sum());
  EXPECT_EQ(again->pattern_max(), whole.pattern_max());
  EXPECT_EQ(again->nonzeros(), whole.nonzeros());
  for (uint64_t f = 0; f < frames; ++f) {
    const auto v = frame_values(raw, DType::U16, f, pixels);
    const std::vector<uint32_t> dense = again->frame(f);
    for (uint64_t p = 0; p < pixels; ++p) ASSERT_EQ(dense[p], v[p]) << f;
    EXPECT_EQ(a.images[0][f], dense_sum(v, ring));
  }
  EXPECT_THROW(first.sums({ring}, nullptr, false, {6}, 1), Error) << "the source copy holds 6 positions";
  // A copy in radial order re-ordered about another centre: its annuli are rank ranges, the sums unchanged.
  whole.order_radially(2.0, 3.5, 2);
  const std::vector<uint32_t> other = annulus_pixels(rows, cols, 2.0, 3.5, 0.5, 3.0);
  EXPECT_TRUE(whole.rank_range(other).has_value());
  EXPECT_FALSE(whole.rank_range(ring).has_value());
  const auto c = whole.sums({other, ring}, nullptr, true, all, 2);
  EXPECT_EQ(c.evaluated_as, (std::vector<std::string>{"rank range", "direct"}));
  EXPECT_EQ(c.totals, b.totals);
  EXPECT_EQ(c.images[1], b.images[0]);
  for (uint64_t f = 0; f < frames; ++f) EXPECT_EQ(c.images[0][f], dense_sum(frame_values(raw, DType::U16, f, pixels), other));
}

// A 10 x 12 scan of 24 x 24 uint16 frames over 3 data files, with dead pixels.
class StemResident : public ::testing::Test {
 protected:
  TempFolder dir{"resident"};

  static std::string write(const std::string& folder, uint64_t seed) {
    StemSimulationParams p;
    p.scan_rows = 10;
    p.scan_cols = 12;
    p.detector = 24;
    p.bf_radius_px = 5;
    p.dose = 3000;
    p.seed = seed;
    DectrisWriterOptions o;
    o.folder = folder;
    o.frames_per_file = 50;
    return write_simulated_acquisition(p, o, 2);
  }
  void TearDown() override {
    ResidentStore::process().drop_all();
    ResidentStore::process().set_budget(0);
    ResidentStore::process().set_device_budget(0);
  }
  static const Planner& planner() { return test::cpu_planner(); }
  // This build's plugins in *registry, for a test on Vulkan: skips when Vulkan is unavailable, fails instead under
  // TM_REQUIRE_VULKAN=1 (.ci/run). The caller returns when IsSkipped() or HasFatalFailure().
  static void open_vulkan(std::unique_ptr<BackendRegistry>& registry) {
    registry = test::make_registry(false);
    registry->load_plugins_from(TM_PLUGIN_DIR);
    const Backend* vulkan = registry->find("vulkan");
    if (vulkan && vulkan->available) return;
    const char* require = std::getenv("TM_REQUIRE_VULKAN");
    if (require && std::string(require) == "1") FAIL() << "TM_REQUIRE_VULKAN=1 but the Vulkan backend is unavailable";
    GTEST_SKIP() << "Vulkan backend unavailable";
  }

 public:
  // Every product field of the two results, compared exactly.
  static void expect_same(const ProductResult& a, const ProductResult& b) {
    EXPECT_EQ(a.scan_shape, b.scan_shape);
    EXPECT_EQ(a.frame_shape, b.frame_shape);
    EXPECT_EQ(a.positions, b.positions);
    EXPECT_EQ(a.totals, b.totals);
    EXPECT_EQ(a.com_weight, b.com_weight);
    EXPECT_EQ(a.com_row, b.com_row);
    EXPECT_EQ(a.com_col, b.com_col);
    EXPECT_EQ(a.images, b.images);
    EXPECT_EQ(a.pattern_sum, b.pattern_sum);
    EXPECT_EQ(a.pattern_max, b.pattern_max);
  }

 protected:
  // The requests a viewer sends: the BF disk and an ADF annulus about the detected disk, an annulus about another
  // centre, a rectangle, the centre of mass over the disk, patterns; whole scan and a region.
  std::vector<ProductRequest> requests(const Acquisition& acq) const {
    ProductRequest pattern;
    pattern.load.scan_shape = std::array<uint64_t, 2>{10, 12};
    pattern.load.threads = 2;
    pattern.frame_sums = false, pattern.pattern = true;
    ResidentStore::process().set_budget(0);
    const ProductResult pr = compute_products(acq, pattern, planner());
    const BrightFieldDisk disk = detect_bright_field_disk(mean_pattern(pr), 24, 24);
    ProductRequest sums = pattern;
    sums.frame_sums = true, sums.pattern = true;
    sums.detectors = {annulus_pixels(24, 24, disk.row, disk.col, 0, disk.radius),
                      annulus_pixels(24, 24, disk.row, disk.col, disk.radius, 2 * disk.radius),
                      annulus_pixels(24, 24, 11.0, 12.5, 3, 9), rectangle_pixels(24, 24, {2, 3, 9, 20})};
    sums.com_pixels = sums.detectors[0];
    ProductRequest images = sums;
    images.com = false, images.pattern = false;
    images.detectors = {sums.detectors[1], complement_pixels(sums.detectors[0], 24 * 24)};  // dense: total - complement
    ProductRequest region = sums;
    region.load.scan_region = Box{2, 7, 3, 12};
    return {pattern, sums, images, region};
  }
};

TEST_F(StemResident, ProductsFromTheCopyEqualTheStreamedOnesBitForBit) {
  const Acquisition acq = open_acquisition(write(dir.str(), 1));
  const auto reqs = requests(acq);
  std::vector<ProductResult> streamed;
  for (const auto& r : reqs) streamed.push_back(compute_products(acq, r, planner()));
  ResidentStore::process().set_budget(uint64_t{1} << 30);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const ProductResult resident = compute_products(acq, reqs[i], planner());
    ASSERT_TRUE(resident.load_provenance.contains("resident"));
    EXPECT_EQ(resident.load_provenance["resident"]["order"], "radial");
    EXPECT_EQ(resident.load_provenance["resident"]["built_now"], i == 0) << i;
    EXPECT_EQ(resident.decoded_bytes > 0, i == 0);
    expect_same(resident, streamed[i]);
    for (const Placement& p : resident.placements) {
      if (p.op != "decode.bitshuffle_lz4") {
        EXPECT_EQ(p.reason, "resident_data");
      }
    }
  }
  // The BF disk and the ADF annulus about the copy's centre are rank ranges; the other centre's annulus is not.
  const ProductResult r = compute_products(acq, reqs[1], planner());
  EXPECT_EQ(r.evaluated_as, (std::vector<std::string>{"rank range", "rank range", "direct", "direct"}));
  // A request the copy does not hold (binned detector) streams, and says why.
  ProductRequest binned = reqs[1];
  binned.load.detector_bin = {2, 2};
  binned.detectors = {{0, 1, 2}};
  binned.com_pixels.clear();
  const ProductResult b = compute_products(acq, binned, planner());
  EXPECT_EQ(b.load_provenance["resident"]["used"], false);
  EXPECT_NE(b.load_provenance["resident"]["why"].get<std::string>().find("binned"), std::string::npos);
}

TEST_F(StemResident, ASmallBudgetEvictsTheLeastRecentlyUsedCopyAndReportsIt) {
  const Acquisition a = open_acquisition(write(dir.file("a"), 1));
  const Acquisition b = open_acquisition(write(dir.file("b"), 2));
  const ProductRequest req = requests(a)[1];
  const ProductResult streamed_a = compute_products(a, req, planner()), streamed_b = compute_products(b, req, planner());
  ResidentStore::process().set_budget(uint64_t{1} << 30);
  const ProductResult first = compute_products(a, req, planner());
  const uint64_t one_copy = first.load_provenance["resident"]["bytes"].get<uint64_t>();
  ResidentStore::process().set_budget(one_copy + one_copy / 2);  // room for one copy only
  const ProductResult second = compute_products(b, req, planner());
  ASSERT_EQ(second.load_provenance["resident"]["evicted"].size(), 1u);
  EXPECT_EQ(second.load_provenance["resident"]["evicted"][0]["acquisition"], a.master);
  const nlohmann::json store = ResidentStore::process().describe();
  EXPECT_EQ(store["copies"].size(), 1u);
  EXPECT_EQ(store["copies"][0]["acquisition"], b.master);
  EXPECT_EQ(store["evictions"].back()["acquisition"], a.master);
  expect_same(second, streamed_b);
  const ProductResult again = compute_products(a, req, planner());  // rebuilt, evicting b
  EXPECT_TRUE(again.load_provenance["resident"]["built_now"].get<bool>());
  expect_same(again, streamed_a);
  // A budget below one copy: nothing is kept, the product streams and says why.
  ResidentStore::process().drop_all();
  ResidentStore::process().set_budget(1024);
  const ProductResult streamed_again = compute_products(a, req, planner());
  EXPECT_EQ(streamed_again.load_provenance["resident"]["used"], false);
  EXPECT_NE(streamed_again.load_provenance["resident"]["why"].get<std::string>().find("budget"), std::string::npos);
  expect_same(streamed_again, streamed_a);
}

TEST_F(StemResident, TwoClientsOnOneAcquisitionShareOneCopy) {
  const Acquisition acq = open_acquisition(write(dir.str(), 1));
  const ProductRequest req = requests(acq)[2];
  const ProductResult streamed = compute_products(acq, req, planner());
  ResidentStore::process().set_budget(uint64_t{1} << 30);
  std::vector<ProductResult> got(2);
  std::vector<std::thread> clients;
  for (int c = 0; c < 2; ++c) clients.emplace_back([&, c] { got[c] = compute_products(acq, req, planner()); });
  for (auto& t : clients) t.join();
  EXPECT_EQ(got[0].load_provenance["resident"]["built_now"].get<bool>() + got[1].load_provenance["resident"]["built_now"].get<bool>(), 1);
  EXPECT_EQ(ResidentStore::process().describe()["copies"].size(), 1u);
  EXPECT_EQ(ResidentStore::process().describe()["copies"][0]["uses"], 2);
  for (const auto& g : got) expect_same(g, streamed);
}

TEST_F(StemResident, AnAcquisitionGrowingWhileResidentExtendsItsCopyWithoutDecodingItAgain) {
  // Data files of 50 frames: while the third (frames 100-119) is being written, rows 0-7 (96 positions) are readable.
  const std::string master = write(dir.str(), 3);
  const std::string third = dir.file("demo_data_000003.h5"), away = dir.file("third.h5");
  const Acquisition whole = open_acquisition(master);
  const auto reqs = requests(whole);
  std::vector<ProductResult> streamed;
  for (const auto& r : reqs) streamed.push_back(compute_products(whole, r, planner()));
  ProductRequest early = reqs[1];
  early.load.scan_region = Box{1, 8, 0, 12};
  const ProductResult early_streamed = compute_products(whole, early, planner());
  std::filesystem::rename(third, away);
  const Acquisition partial = open_acquisition(master);
  ASSERT_FALSE(partial.complete());
  EXPECT_EQ(partial.frames_readable_prefix(), 100u);
  ResidentStore::process().set_budget(uint64_t{1} << 30);
  const ProductResult early_resident = compute_products(partial, early, planner());
  ASSERT_TRUE(early_resident.load_provenance["resident"].value("built_now", false)) << early_resident.load_provenance.dump();
  EXPECT_EQ(early_resident.load_provenance["resident"]["positions"], 96);
  EXPECT_EQ(early_resident.load_provenance["resident"]["complete"], false);
  expect_same(early_resident, early_streamed);
  // A region reaching the rows not yet written streams (and the streamed pass names the missing frame).
  ProductRequest late = reqs[1];
  late.load.scan_region = Box{7, 9, 0, 12};
  try {
    compute_products(partial, late, planner());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("frame 100"), std::string::npos) << e.what();
  }
  // The writer finishes: the copy is extended by the last 24 positions, the 96 held are reused.
  std::filesystem::rename(away, third);
  const Acquisition complete = open_acquisition(master);
  ASSERT_TRUE(complete.complete());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const ProductResult r = compute_products(complete, reqs[i], planner());
    const nlohmann::json& res = r.load_provenance["resident"];
    ASSERT_TRUE(res.contains("positions_reused")) << r.load_provenance.dump();
    EXPECT_EQ(res["built_now"], i == 0) << i;
    EXPECT_EQ(res["positions_reused"], 96);
    EXPECT_EQ(res["positions_appended"], 24);
    EXPECT_EQ(res["extensions"], 1);
    EXPECT_EQ(res["complete"], true);
    if (i == 0) {
      EXPECT_EQ(r.decoded_bytes, 24u * 24 * 24 * 2) << "only the new frames are decoded";
      ASSERT_EQ(res["evicted"].size(), 1u);
      EXPECT_NE(res["evicted"][0]["reason"].get<std::string>().find("superseded"), std::string::npos);
    }
    expect_same(r, streamed[i]);
  }
  EXPECT_EQ(ResidentStore::process().describe()["copies"].size(), 1u);
  // A data file the copy holds frames of is rewritten: built again from the start.
  std::filesystem::last_write_time(dir.file("demo_data_000001.h5"), std::filesystem::file_time_type::clock::now() + std::chrono::seconds(5));
  const Acquisition touched = open_acquisition(master);
  const ProductResult rebuilt = compute_products(touched, reqs[1], planner());
  EXPECT_EQ(rebuilt.load_provenance["resident"]["built_now"], true);
  EXPECT_EQ(rebuilt.load_provenance["resident"]["positions_reused"], 0);
  EXPECT_EQ(rebuilt.load_provenance["resident"]["positions_appended"], 120);
  expect_same(rebuilt, streamed[1]);
}

TEST_F(StemResident, ADamagedChunkMetWhileBuildingNamesTheFrameAndLeavesNothingResident) {
  const std::string master = write(dir.str(), 1);
  test::corrupt_stored_frame(dir.file("demo_data_000001.h5"), 3);
  const Acquisition acq = open_acquisition(master);
  ResidentStore::process().set_budget(uint64_t{1} << 30);
  ProductRequest req;
  req.load.scan_shape = std::array<uint64_t, 2>{10, 12};
  req.detectors = {{0, 1, 2}};
  try {
    compute_products(acq, req, planner());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("frame 3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ResidentStore::process().describe()["copies"].size(), 0u);
}

// With the sums placed on a device backend (strict: Vulkan, or the CUDA/HIP kernel source under the host grid emulation,
// gpuemu), the copy's image is uploaded once and read there by every later product: the first product reports the
// upload (bytes_transferred, built_now), the others move nothing; every product equals the streamed CPU one field for
// field; the copy's description lists the device copy (location, bytes, built_at).
void expect_sums_on_device_copy(const Acquisition& acq, const std::vector<ProductRequest>& all, const std::string& name,
                                const BackendRegistry& registry) {
  const CostModel costs;
  Constraints strict;
  strict.strict_backend = name;
  const Planner on_device(registry, costs, strict);
  std::vector<ProductRequest> reqs(all.begin() + 1, all.end());  // the pattern alone has no sums
  std::vector<ProductResult> streamed;
  ResidentStore::process().set_budget(0);
  for (const auto& r : reqs) streamed.push_back(compute_products(acq, r, test::cpu_planner()));
  ResidentStore::process().set_budget(uint64_t{1} << 30);
  for (size_t i = 0; i < reqs.size(); ++i) {
    const ProductResult r = compute_products(acq, reqs[i], on_device);
    StemResident::expect_same(r, streamed[i]);
    ASSERT_TRUE(r.load_provenance["resident"].contains("device_copy")) << r.load_provenance.dump();
    const nlohmann::json& copy = r.load_provenance["resident"]["device_copy"];
    EXPECT_EQ(copy["location"].get<std::string>().rfind(name + "/", 0), 0u) << copy.dump();
    EXPECT_EQ(copy["built_now"], i == 0) << i;
    const auto sums = std::find_if(r.placements.begin(), r.placements.end(), [](const Placement& p) { return p.op == "stem.compact_sums"; });
    ASSERT_NE(sums, r.placements.end());
    EXPECT_EQ(sums->backend, name);
    EXPECT_EQ(sums->bytes_transferred, i == 0 ? copy["bytes"].get<uint64_t>() : 0u) << "uploaded once, then read in place";
    // The annuli about the copy's centre are key ranges there too (two running totals), the others entry by entry.
    const ProductResult host = compute_products(acq, reqs[i], test::cpu_planner());
    ASSERT_EQ(r.evaluated_as.size(), host.evaluated_as.size());
    for (size_t d = 0; d < r.evaluated_as.size(); ++d)
      EXPECT_EQ(r.evaluated_as[d], (host.evaluated_as[d] == "rank range" ? "rank range on " : "entry by entry on ") + name) << d;
    EXPECT_NE(std::find(r.evaluated_as.begin(), r.evaluated_as.end(), "rank range on " + name), r.evaluated_as.end());
  }
  const nlohmann::json store = ResidentStore::process().describe();
  ASSERT_EQ(store["copies"].size(), 1u);
  ASSERT_EQ(store["copies"][0]["device_copies"].size(), 1u) << "one device copy, shared by every product";
  EXPECT_GT(store["copies"][0]["device_copies"][0]["bytes"].get<uint64_t>(), 0u);
  EXPECT_FALSE(store["copies"][0]["device_copies"][0]["built_at"].get<std::string>().empty());
  // The CPU planner still computes from the host copy (reason resident_data), with the same numbers.
  StemResident::expect_same(compute_products(acq, reqs[0], test::cpu_planner()), streamed[0]);
  ResidentStore::process().drop_all();  // the device copies go with the copy, before the registry
}

TEST_F(StemResident, SumsOnVulkanReadTheDeviceCopyUploadedOnceAndEqualTheStreamedOnes) {
  std::unique_ptr<BackendRegistry> registry;
  open_vulkan(registry);
  if (IsSkipped() || HasFatalFailure()) return;
  const Acquisition acq = open_acquisition(write(dir.str(), 5));
  expect_sums_on_device_copy(acq, requests(acq), "vulkan", *registry);
}

// A device that cannot run the call on its copy (Vulkan chunks of 256 KiB: a page of the image straddles two, the
// kernel answers TM_ERR_UNSUPPORTED) is not an error of the product: it streams on that backend, and says why.
TEST_F(StemResident, ADeviceCopyTheKernelCannotReadStreamsInsteadAndSaysWhy) {
  test::ScopedEnv chunks("TENSORMORPH_VULKAN_CHUNK_BYTES", "262144");
  std::unique_ptr<BackendRegistry> registry;
  open_vulkan(registry);
  if (IsSkipped() || HasFatalFailure()) return;
  // A 30 x 30 scan: the image (about 0.7 MB, one page) is more than one 256 KiB chunk.
  StemSimulationParams sim;
  sim.scan_rows = sim.scan_cols = 30, sim.detector = 24, sim.bf_radius_px = 5, sim.dose = 3000, sim.seed = 7;
  DectrisWriterOptions o;
  o.folder = dir.str(), o.frames_per_file = 300;
  const Acquisition acq = open_acquisition(write_simulated_acquisition(sim, o, 2));
  ProductRequest req;
  req.load.scan_shape = std::array<uint64_t, 2>{30, 30};
  req.load.threads = 2;
  req.detectors = {annulus_pixels(24, 24, 12, 12, 0, 5), annulus_pixels(24, 24, 9, 14, 2, 8)};
  req.com = true;
  const ProductResult streamed = compute_products(acq, req, planner());
  ResidentStore::process().set_budget(uint64_t{1} << 30);
  const CostModel costs;
  Constraints strict;
  strict.strict_backend = "vulkan";
  const ProductResult r = compute_products(acq, req, Planner(*registry, costs, strict));
  expect_same(r, streamed);
  ASSERT_EQ(r.load_provenance["resident"]["used"], false) << r.load_provenance.dump();
  EXPECT_NE(r.load_provenance["resident"]["why"].get<std::string>().find("straddles"), std::string::npos) << r.load_provenance.dump();
  ResidentStore::process().drop_all();
}

TEST_F(StemResident, SumsOnTheEmulatedGpuReadTheDeviceCopyUploadedOnceAndEqualTheStreamedOnes) {
  auto registry = test::make_registry(false);
  registry->load_plugins_from(TM_GPUEMU_PLUGIN_DIR);
  const Backend* gpu = registry->find("gpuemu");
  ASSERT_TRUE(gpu && gpu->available) << "gpuemu is built with the tests";
  const Acquisition acq = open_acquisition(write(dir.str(), 6));
  expect_sums_on_device_copy(acq, requests(acq), "gpuemu", *registry);
}

// A budget holds on each device as on the host: with room for both host copies but one device copy, summing the second
// acquisition on the (emulated) GPU evicts the first one's device copy, says so in the report and the store's
// evictions, keeps both host copies, and the first acquisition's next request uploads its device copy again (evicting
// the second's); every product equals the streamed one.
TEST_F(StemResident, TheBudgetHoldsOnTheDeviceEvictingTheLeastRecentlyUsedDeviceCopy) {
  auto registry = test::make_registry(false);
  registry->load_plugins_from(TM_GPUEMU_PLUGIN_DIR);
  ASSERT_TRUE(registry->find("gpuemu") && registry->find("gpuemu")->available);
  const CostModel costs;
  Constraints strict;
  strict.strict_backend = "gpuemu";
  const Planner on_device(*registry, costs, strict);
  const Acquisition a = open_acquisition(write(dir.file("a"), 8));
  const Acquisition b = open_acquisition(write(dir.file("b"), 9));
  const ProductRequest req = requests(a)[2];
  const ProductResult streamed_a = compute_products(a, req, planner()), streamed_b = compute_products(b, req, planner());
  ResidentStore::process().set_budget(uint64_t{1} << 30);
  const ProductResult first = compute_products(a, req, on_device);
  expect_same(first, streamed_a);
  const uint64_t host_bytes = first.load_provenance["resident"]["bytes"].get<uint64_t>();
  const uint64_t device_bytes = first.load_provenance["resident"]["device_copy"]["bytes"].get<uint64_t>();
  // Both host copies fit the host budget; one device copy fits the device budget (stem.resident_device_memory).
  ASSERT_GT(host_bytes, 0u);
  ResidentStore::process().set_device_budget(device_bytes + device_bytes / 2);
  EXPECT_EQ(ResidentStore::process().describe()["device_budget"], device_bytes + device_bytes / 2);
  const ProductResult second = compute_products(b, req, on_device);
  expect_same(second, streamed_b);
  const nlohmann::json& evicted = second.load_provenance["resident"]["device_copy"]["evicted"];
  ASSERT_EQ(evicted.size(), 1u) << second.load_provenance.dump();
  EXPECT_EQ(evicted[0]["acquisition"], a.master);
  EXPECT_EQ(evicted[0]["bytes"], device_bytes);
  EXPECT_EQ(evicted[0]["location"].get<std::string>().rfind("gpuemu/", 0), 0u);
  const nlohmann::json store = ResidentStore::process().describe();
  ASSERT_EQ(store["copies"].size(), 2u) << "both host copies stay";
  EXPECT_EQ(store["copies"][0]["device_copies"].size(), 1u);  // b, most recently used
  EXPECT_EQ(store["copies"][1]["device_copies"].size(), 0u);  // a's went
  EXPECT_NE(store["evictions"].back()["reason"].get<std::string>().find("device budget"), std::string::npos);
  const ProductResult again = compute_products(a, req, on_device);
  expect_same(again, streamed_a);
  EXPECT_TRUE(again.load_provenance["resident"]["device_copy"]["built_now"].get<bool>());
  EXPECT_EQ(again.load_provenance["resident"]["device_copy"]["evicted"][0]["acquisition"], b.master);
  // A device budget lowered below one device copy evicts a's and records it; b's upload is refused, so (strictly on
  // the GPU) its sums stream there instead, saying why.
  ResidentStore::process().set_device_budget(device_bytes / 2);
  const nlohmann::json after = ResidentStore::process().describe();
  EXPECT_EQ(after["copies"][0]["device_copies"].size(), 0u);
  EXPECT_EQ(after["evictions"].back()["reason"], "device budget lowered");
  EXPECT_EQ(after["evictions"].back()["acquisition"], a.master);
  const ProductResult refused = compute_products(b, req, on_device);
  expect_same(refused, streamed_b);
  EXPECT_EQ(refused.load_provenance["resident"]["used"], false) << refused.load_provenance.dump();
  EXPECT_NE(refused.load_provenance["resident"]["why"].get<std::string>().find("over the resident budget on gpuemu/"), std::string::npos)
      << refused.load_provenance.dump();
  ResidentStore::process().drop_all();  // the device copies go with the copies, before the registry
}

// stem.compact_sums (op_contracts.h) on the CPU, its reference: over the device image of a copy it gives what the copy's
// own sums give (which CompactFrames.EqualTheDenseFrames... holds to the dense frames), for uint16 and uint32 keys, in
// pixel and radial order, with and without the fixed sums and a centre-of-mass list, over one page and several.
TEST(CompactSums, TheCpuOpOverTheImageEqualsTheCopysOwnSums) {
  for (const test::CompactShape& sh : test::compact_shapes()) {
    const test::CompactCase c = test::compact_case(sh.count, sh.rows, sh.cols, sh.dt, sh.density, sh.radial, 17);
    const CompactImage image = compact_image(*c.frames);
    EXPECT_EQ(image.key_bytes, sh.rows * sh.cols > 65536 ? 4u : 2u);
    EXPECT_EQ(image.size, compact_image_bytes(*c.frames));
    if (sh.rows == 250) {
      EXPECT_GT(image.page_first.size(), 2u) << "several pages";
    }
    const Placement at = test::cpu_planner().place(compact_sums_request(*c.frames, {}));
    ASSERT_EQ(at.backend, "cpu");
    for (const bool fixed : {true, false})
      for (const auto* com : {&c.com, static_cast<const std::vector<uint32_t>*>(nullptr)}) {
        const std::string what = std::to_string(sh.rows) + "x" + std::to_string(sh.cols) + (fixed ? " fixed" : " lists") + (com ? " com" : "");
        const auto want = c.frames->sums(c.detectors, com, fixed, c.positions, 2);
        test::expect_same_sums(want, compact_sums(at, *c.frames, nullptr, &image, c.detectors, com, fixed, c.positions, 3), what);
      }
  }
}

TEST(CompactSums, MalformedCallsAreRefusedNamingTheField) {
  const test::CompactCase c = test::compact_case(12, 13, 11, DType::U16, 0.4, false, 3);
  const Placement at = test::cpu_planner().place(compact_sums_request(*c.frames, {}));
  test::expect_malformed_calls_refused(at, c);
  // And through the domain: too many detectors, a detector pixel outside the frame.
  const CompactImage image = compact_image(*c.frames);
  std::vector<std::vector<uint32_t>> many(65, std::vector<uint32_t>{1});
  EXPECT_THROW(compact_sums(at, *c.frames, nullptr, &image, many, nullptr, true, c.positions, 1), Error);
  EXPECT_THROW(compact_sums(at, *c.frames, nullptr, &image, {{143}}, nullptr, true, c.positions, 1), Error);
}

}  // namespace
}  // namespace tmorph
