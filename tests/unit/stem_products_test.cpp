// 4D-STEM products: the stem ops against brute force, and products with known answers — a shifted disk's
// centre of mass, a rotated gradient field's DPC angle, a phase object's iDPC — plus geometry and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cpu/cpu_backend.h"
#include "stem/acquisition.h"
#include "ops/kernel_call.h"
#include "stem/products/dpc.h"
#include "stem/products/products.h"
#include "stem/products/virtual_detector.h"
#include "stem_fixture.h"
#include "tensormorph/error.h"
#include "tensormorph/op_contracts.h"
#include "test_support.h"

namespace tmorph {
namespace {

using test::TempFolder;

template <class T>
std::vector<T> random_frames(uint64_t n, uint64_t seed, uint64_t max) {
  std::mt19937_64 rng(seed);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(rng() % (max + 1));
  return v;
}

// Runs an op on the CPU backend directly through its table (what the planner would place).
void run_cpu(tm_op op, DType dtype, const void* in, uint64_t n, const void* params, uint64_t params_size, void* out, uint64_t out_size,
             unsigned threads) {
  auto reg = test::make_registry(false);
  const CostModel costs;
  const Constraints constraints;
  Planner planner(*reg, costs, constraints);  // holds references: no temporaries
  OpRequest r;
  r.op = op, r.dtype = dtype, r.elements = n, r.bytes = n * dtype_size(dtype);
  const Placement p = planner.place(r);
  ASSERT_EQ(p.backend, "cpu");
  run_placed_kernel(p, op, {dtype, in, n, params, params_size, out, out_size, threads});
}

TEST(StemOps, FrameSumsEqualBruteForceForEveryDtypeAndThreadCount) {
  const uint64_t rows = 7, cols = 9, pixels = rows * cols, frames = 11;
  const std::vector<uint32_t> a = {0, 5, 17, 62}, b = {3, 4, 8, 9, 10, 11, 12, 40};  // 8, 9: a run across a row end
  const std::vector<uint64_t> offsets = {0, a.size(), a.size() + b.size()};
  std::vector<uint32_t> lists(a);
  lists.insert(lists.end(), b.begin(), b.end());
  for (const uint32_t com_list : {TM_STEM_ALL_PIXELS, 1u})
    for (DType dt : {DType::U8, DType::U16, DType::U32})
      for (unsigned threads : {1u, 2u, 5u}) {
        const uint64_t max = dt == DType::U8 ? 255 : dt == DType::U16 ? 65535 : 0xFFFFFFFFull;
        std::vector<uint8_t> raw(frames * pixels * dtype_size(dt));
        {
          auto v64 = random_frames<uint64_t>(frames * pixels, 7 + threads, max);
          for (uint64_t i = 0; i < v64.size(); ++i) std::memcpy(raw.data() + i * dtype_size(dt), &v64[i], dtype_size(dt));
        }
        const auto value = [&](uint64_t f, uint64_t i) {
          uint64_t v = 0;
          std::memcpy(&v, raw.data() + (f * pixels + i) * dtype_size(dt), dtype_size(dt));
          return v;
        };
        const tm_stem_frame_sums_params_v1 params{pixels, static_cast<uint32_t>(cols), 2, offsets.data(), lists.data(), com_list, 0};
        std::vector<uint64_t> out(frames * 6, 0xDEAD);  // 4 fixed values + 2 lists per frame
        run_cpu(TM_OP_STEM_FRAME_SUMS, dt, raw.data(), frames * pixels, &params, sizeof params, out.data(), out.size() * 8, threads);
        std::vector<uint64_t> lists_only(frames * 6, 0xDEAD);
        tm_stem_frame_sums_params_v1 only = params;
        only.flags = TM_STEM_LISTS_ONLY;
        run_cpu(TM_OP_STEM_FRAME_SUMS, dt, raw.data(), frames * pixels, &only, sizeof only, lists_only.data(), lists_only.size() * 8, threads);
        for (uint64_t f = 0; f < frames; ++f) {
          const uint64_t* lo = lists_only.data() + f * 6;
          ASSERT_EQ(lo[0] + lo[1] + lo[2] + lo[3], 0u);
          ASSERT_EQ(lo[4], out[f * 6 + 4]);
          ASSERT_EQ(lo[5], out[f * 6 + 5]);
        }
        for (uint64_t f = 0; f < frames; ++f) {
          uint64_t total = 0, w = 0, sr = 0, sc = 0, sa = 0, sb = 0;
          for (uint64_t i = 0; i < pixels; ++i) total += value(f, i);
          for (uint32_t i : a) sa += value(f, i);
          for (uint32_t i : b) sb += value(f, i);
          for (uint64_t i = 0; i < pixels; ++i)
            if (com_list == TM_STEM_ALL_PIXELS || std::find(b.begin(), b.end(), i) != b.end())
              w += value(f, i), sr += (i / cols) * value(f, i), sc += (i % cols) * value(f, i);
          const uint64_t* o = out.data() + f * 6;
          ASSERT_EQ(o[0], total);
          ASSERT_EQ(o[1], w);
          ASSERT_EQ(o[2], sr);
          ASSERT_EQ(o[3], sc);
          ASSERT_EQ(o[4], sa);
          ASSERT_EQ(o[5], sb);
        }
      }
}

TEST(StemOps, PatternReduceAccumulatesSumsAndMaxima) {
  const uint64_t pixels = 130, frames = 6;
  const auto v = random_frames<uint16_t>(frames * pixels, 3, 65535);
  const tm_stem_pattern_params_v1 params{pixels};
  std::vector<uint8_t> out(pixels * 12, 0);
  // Two calls (frames 0-3, then 4-5) accumulate into the same output.
  run_cpu(TM_OP_STEM_PATTERN_REDUCE, DType::U16, v.data(), 4 * pixels, &params, sizeof params, out.data(), out.size(), 2);
  run_cpu(TM_OP_STEM_PATTERN_REDUCE, DType::U16, v.data() + 4 * pixels, 2 * pixels, &params, sizeof params, out.data(), out.size(), 3);
  for (uint64_t i = 0; i < pixels; ++i) {
    uint64_t s = 0;
    uint32_t m = 0;
    for (uint64_t f = 0; f < frames; ++f) s += v[f * pixels + i], m = std::max<uint32_t>(m, v[f * pixels + i]);
    uint64_t got_s = 0;
    uint32_t got_m = 0;
    std::memcpy(&got_s, out.data() + i * 8, 8);
    std::memcpy(&got_m, out.data() + pixels * 8 + i * 4, 4);
    ASSERT_EQ(got_s, s) << i;
    ASSERT_EQ(got_m, m) << i;
  }
}

TEST(StemOps, MalformedCallsAreRefused) {
  const std::vector<uint16_t> frame(12, 1);
  const std::vector<uint64_t> offsets = {0, 2};
  const std::vector<uint32_t> unsorted = {5, 3};
  const tm_stem_frame_sums_params_v1 bad_list{12, 4, 1, offsets.data(), unsorted.data(), TM_STEM_ALL_PIXELS, 0};
  std::vector<uint64_t> out(5);
  EXPECT_THROW(run_cpu(TM_OP_STEM_FRAME_SUMS, DType::U16, frame.data(), 12, &bad_list, sizeof bad_list, out.data(), 40, 1), Error);
  const tm_stem_frame_sums_params_v1 ragged{12, 5, 0, nullptr, nullptr, TM_STEM_ALL_PIXELS, 0};  // 12 pixels are not rows of 5
  EXPECT_THROW(run_cpu(TM_OP_STEM_FRAME_SUMS, DType::U16, frame.data(), 12, &ragged, sizeof ragged, out.data(), 40, 1), Error);
}

// ---- Geometry

TEST(StemGeometry, RectangleIsHalfOpenAndValidated) {
  // Rows [1, 3), columns [2, 5) of a 4 x 6 frame: row-major indices 1*6+2.. and 2*6+2..
  EXPECT_EQ(rectangle_pixels(4, 6, {1, 2, 3, 5}), (std::vector<uint32_t>{8, 9, 10, 14, 15, 16}));
  EXPECT_EQ(rectangle_pixels(4, 6, {0, 0, 4, 6}).size(), 24u);  // the whole frame: r1 = rows, c1 = cols are inside
  EXPECT_EQ(rectangle_pixels(4, 6, {3, 5, 4, 6}), (std::vector<uint32_t>{23}));
  const auto message = [](const DetectorRect& r) {
    try {
      rectangle_pixels(4, 6, r);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({1, 2, 1, 5}).find("is empty"), std::string::npos);  // r0 == r1
  EXPECT_NE(message({1, 5, 3, 2}).find("is empty"), std::string::npos);  // c0 > c1
  const std::string outside = message({0, 0, 5, 6});                    // one row too many
  EXPECT_NE(outside.find("outside the 4x6 detector"), std::string::npos) << outside;
  EXPECT_NE(outside.find("0,0,5,6"), std::string::npos) << outside;
  EXPECT_NE(message({0, 0, 4, 7}).find("outside"), std::string::npos);
}

TEST(StemGeometry, AnnulusUsesFloat32DistancesWithBothEndsInclusive) {
  // Centre (2, 2), radius exactly 1: the four neighbours at distance 1 are inside, diagonals (1.414) are not.
  const auto disk = annulus_pixels(5, 5, 2, 2, 0, 1);
  EXPECT_EQ(disk, (std::vector<uint32_t>{7, 11, 12, 13, 17}));
  const auto ring = annulus_pixels(5, 5, 2, 2, 1, 1);
  EXPECT_EQ(ring, (std::vector<uint32_t>{7, 11, 13, 17}));
  EXPECT_EQ(complement_pixels(disk, 25).size(), 20u);
  EXPECT_THROW(annulus_pixels(5, 5, 2, 2, 0, 0), Error);     // radius <= 0
  EXPECT_THROW(annulus_pixels(5, 5, 2, 2, 3, 1), Error);     // inner > outer
  EXPECT_THROW(annulus_pixels(5, 5, 50, 50, 0, 3), Error);   // outside the detector
  EXPECT_EQ(preset_radii("haadf", 3)->second, 12);
  EXPECT_TRUE(std::isinf(preset_radii("df", 3)->second));
}

TEST(StemGeometry, BrightFieldDiskOfAUniformDisk) {
  const uint64_t n = 41;
  const auto pixels = annulus_pixels(n, n, 17, 22, 0, 8);
  std::vector<double> pattern(n * n, 0.5);
  for (uint32_t p : pixels) pattern[p] = 100;
  const BrightFieldDisk d = detect_bright_field_disk(pattern, n, n);
  EXPECT_NEAR(d.row, 17, 1e-9);
  EXPECT_NEAR(d.col, 22, 1e-9);
  EXPECT_EQ(d.area, pixels.size());
  EXPECT_NEAR(d.radius, std::sqrt(pixels.size() / M_PI), 1e-12);
  EXPECT_THROW(detect_bright_field_disk(std::vector<double>(n * n, 1.0), n, n), Error);
}

// ---- Known answers

// Frames holding a uniform disk of radius 4 whose centre moves with the scan position by whole pixels.
class ShiftedDisk : public ::testing::Test {
 protected:
  static constexpr uint64_t kScan = 5, kK = 32;
  TempFolder dir{"disk"};
  std::string master;
  static int shift_r(uint64_t f) { return static_cast<int>(f % kScan) - 2; }
  static int shift_c(uint64_t f) { return static_cast<int>((f / kScan) % 3) - 1; }
  void SetUp() override {
    DectrisWriterOptions o;
    o.folder = dir.str();
    DectrisWriter w(o, DType::U16, kK, kK, kScan * kScan, {});
    for (uint64_t f = 0; f < kScan * kScan; ++f) {
      std::vector<uint16_t> px(kK * kK, 0);
      for (uint32_t p : annulus_pixels(kK, kK, 16 + shift_r(f), 15 + shift_c(f), 0, 4)) px[p] = 10;
      w.write_frame(f, reinterpret_cast<const uint8_t*>(px.data()));
    }
  }
};

TEST_F(ShiftedDisk, CentreOfMassIsTheDiskCentre) {
  const Acquisition acq = open_acquisition(master = dir.file("demo_master.h5"));
  auto reg = test::make_registry(false);
  ProductRequest req;
  req.load.threads = 2;
  const ProductResult r = compute_products(acq, req, Planner(*reg, CostModel(), Constraints()));
  ASSERT_EQ(r.placements.size(), 2u);
  EXPECT_EQ(r.placements[0].op, "stem.frame_sums");
  EXPECT_EQ(r.placements[1].op, "decode.bitshuffle_lz4");
  double mean_r = 0, mean_c = 0;
  for (uint64_t f = 0; f < kScan * kScan; ++f) mean_r += 16 + shift_r(f), mean_c += 15 + shift_c(f);
  mean_r /= kScan * kScan, mean_c /= kScan * kScan;
  const ScanField com = center_of_mass(r);
  for (uint64_t f = 0; f < kScan * kScan; ++f) {
    // Unmasked sums: the disk's raw centroid is its centre exactly.
    EXPECT_EQ(r.com_row[f] * 1.0 / r.com_weight[f], 16 + shift_r(f));
    EXPECT_NEAR(com.u[f], 16 + shift_r(f) - mean_r, 1e-12);
    EXPECT_NEAR(com.v[f], 15 + shift_c(f) - mean_c, 1e-12);
  }
}

TEST_F(ShiftedDisk, VirtualImagesAndPatternsEqualBruteForce) {
  const Acquisition acq = open_acquisition(dir.file("demo_master.h5"));
  auto reg = test::make_registry(false);
  ProductRequest req;
  req.load.threads = 2;
  req.pattern = true;
  const auto bf = annulus_pixels(kK, kK, 16, 15, 0, 3);
  const auto df = annulus_pixels(kK, kK, 16, 15, 3, INFINITY);  // dense: total - complement
  req.detectors = {bf, df};
  req.batch_bytes = 3 * kK * kK * 2;  // several batches
  const ProductResult r = compute_products(acq, req, Planner(*reg, CostModel(), Constraints()));
  EXPECT_EQ(r.evaluated_as, (std::vector<std::string>{"direct", "total - complement"}));
  for (uint64_t f = 0; f < kScan * kScan; ++f) {
    std::vector<uint16_t> px(kK * kK, 0);
    for (uint32_t p : annulus_pixels(kK, kK, 16 + shift_r(f), 15 + shift_c(f), 0, 4)) px[p] = 10;
    uint64_t sb = 0, sd = 0;
    for (uint32_t p : bf) sb += px[p];
    for (uint32_t p : df) sd += px[p];
    EXPECT_EQ(r.images[0][f], sb);
    EXPECT_EQ(r.images[1][f], sd);
    EXPECT_EQ(r.totals[f], annulus_pixels(kK, kK, 16, 15, 0, 4).size() * 10);
  }
  uint32_t max_anywhere = *std::max_element(r.pattern_max.begin(), r.pattern_max.end());
  EXPECT_EQ(max_anywhere, 10u);
  uint64_t sum = 0;
  for (uint64_t s : r.pattern_sum) sum += s;
  EXPECT_EQ(sum, r.totals[0] * kScan * kScan);
}

// A curl-free field (the gradient of a smooth potential) rotated by -θ0 is found to need θ0.
ScanField gradient_field(uint64_t n, bool periodic_potential, std::vector<double>* potential = nullptr) {
  ScanField g;
  g.rows = g.cols = n;
  g.u.resize(n * n), g.v.resize(n * n);
  if (potential) potential->resize(n * n);
  const double k = 2 * M_PI / static_cast<double>(n);
  for (uint64_t r = 0; r < n; ++r)
    for (uint64_t c = 0; c < n; ++c) {
      const double x = static_cast<double>(r), y = static_cast<double>(c);
      if (periodic_potential) {  // φ = sin(2k r) cos(3k c) + 0.5 cos(k r + k c)
        if (potential) (*potential)[r * n + c] = std::sin(2 * k * x) * std::cos(3 * k * y) + 0.5 * std::cos(k * x + k * y);
        g.u[r * n + c] = 2 * k * std::cos(2 * k * x) * std::cos(3 * k * y) - 0.5 * k * std::sin(k * x + k * y);
        g.v[r * n + c] = -3 * k * std::sin(2 * k * x) * std::sin(3 * k * y) - 0.5 * k * std::sin(k * x + k * y);
      } else {  // φ = exp(-((r-12)² + (c-9)²)/40) + 0.02 r c
        const double e = std::exp(-((x - 12) * (x - 12) + (y - 9) * (y - 9)) / 40);
        g.u[r * n + c] = -e * (x - 12) / 20 + 0.02 * y;
        g.v[r * n + c] = -e * (y - 9) / 20 + 0.02 * x;
      }
    }
  return g;
}

TEST(StemDpc, TheRotationOfARotatedGradientFieldIsFound) {
  const ScanField g = gradient_field(24, false);
  for (const double theta0 : {0.3, 1.2, 2.5})
    for (const bool transpose : {false, true}) {
      ScanField measured = rotate_field(g, -theta0, false);
      if (transpose) std::swap(measured.u, measured.v);
      const DpcRotation rot = find_dpc_rotation(measured);
      EXPECT_EQ(rot.transpose, transpose) << theta0;
      const double diff = std::remainder(rot.angle - theta0, M_PI);  // θ and θ + π give the same curl
      EXPECT_LT(std::abs(diff), 1e-3) << "theta0 " << theta0 << " found " << rot.angle;
      EXPECT_LT(rot.curl2, 1e-3 * rot.div2);
      EXPECT_GE(rot.angle, 0);
      EXPECT_LT(rot.angle, M_PI);
    }
  ScanField tiny;
  tiny.rows = 2, tiny.cols = 5, tiny.u.assign(10, 0), tiny.v.assign(10, 0);
  EXPECT_THROW(find_dpc_rotation(tiny), Error);
}

TEST(StemDpc, IdpcOfAPhaseGradientIsThePhase) {
  // The contract's sign: for a field equal to +∇φ the result is −(π/2)(φ − mean φ) for smooth periodic φ.
  std::vector<double> phi;
  const ScanField g = gradient_field(32, true, &phi);
  const std::vector<double> out = integrate_dpc(g);
  double mean = 0;
  for (double p : phi) mean += p;
  mean /= static_cast<double>(phi.size());
  for (size_t i = 0; i < phi.size(); ++i) ASSERT_NEAR(out[i], -(M_PI / 2) * (phi[i] - mean), 1e-9) << i;
}

TEST(StemDpc, FftViewIsFftshiftedLog1pMagnitude) {
  // A constant image: all energy at zero frequency, which fftshift moves to the centre.
  const std::vector<double> img(6 * 4, 2.0);
  const auto v = fft_view(img, 6, 4);
  for (uint64_t i = 0; i < 24; ++i) EXPECT_NEAR(v[i], i == 3 * 4 + 2 ? std::log1p(48.0) : 0.0, 1e-12) << i;
}

}  // namespace
}  // namespace tmorph
