// The 4D-STEM domain decisions the CLI (and any other face) delegates: product kinds, the calibration with
// its sources (the one rule for the detector's angular pixel size), the bright-field disk (given, detected,
// partly given), virtual detectors in pixels and mrad, the DPC rotation (given or found) and SSB's setup.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cpu/cpu_backend.h"
#include "stem/calibration.h"
#include "stem/products/detector_geometry.h"
#include "stem/products/dpc.h"
#include "stem/products/product_kind.h"
#include "stem/demo/simulate.h"
#include "stem/ssb/ssb_setup.h"
#include "stem_fixture.h"
#include "tensormorph/error.h"
#include "test_support.h"

namespace tmorph {
namespace {

// The message of the InvalidArgument `f` throws ("" when it throws nothing or something else).
template <class F>
std::string invalid_argument(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind() == ErrorKind::InvalidArgument ? e.what() : std::string("wrong kind: ") + e.what();
  }
  return "";
}

// ---- product kinds

TEST(StemProductKind, NamesRoundTripAndBadNamesListTheValidOnes) {
  ASSERT_EQ(all_product_kinds().size(), 11u);
  for (ProductKind k : all_product_kinds()) EXPECT_EQ(parse_product_kind(product_name(k)), k) << product_name(k);
  EXPECT_EQ(parse_product_kind("mean-dp"), ProductKind::mean_dp);
  EXPECT_STREQ(product_name(ProductKind::mean_dp), "mean-dp");
  EXPECT_FALSE(product_kind_from_name("mean_dp"));
  EXPECT_FALSE(product_kind_from_name("BF"));
  const std::string msg = invalid_argument([] { parse_product_kind("haadff", "--of"); });
  EXPECT_EQ(msg, "--of haadff: expected one of bf, abf, adf, haadf, df, mask, com, dpc, idpc, fft, mean-dp");
}

TEST(StemProductKind, PredicatesAndPresetRadii) {
  using K = ProductKind;
  for (K k : {K::bf, K::abf, K::adf, K::haadf, K::df}) {
    EXPECT_TRUE(is_preset_detector(k));
    EXPECT_TRUE(is_virtual_image(k));
    EXPECT_TRUE(cacheable(k));
    EXPECT_TRUE(is_fft_source(k));
  }
  EXPECT_TRUE(is_virtual_image(K::mask));
  EXPECT_FALSE(is_preset_detector(K::mask));
  EXPECT_FALSE(cacheable(K::mask));
  EXPECT_TRUE(is_fft_source(K::mask));
  EXPECT_FALSE(cacheable(K::fft));
  EXPECT_TRUE(cacheable(K::mean_dp));
  EXPECT_TRUE(is_fft_source(K::mean_dp));
  for (K k : {K::com, K::dpc, K::idpc}) {
    EXPECT_TRUE(is_com_field(k));
    EXPECT_TRUE(cacheable(k));
    EXPECT_FALSE(is_fft_source(k));
    EXPECT_FALSE(is_virtual_image(k));
  }
  EXPECT_FALSE(needs_dpc_rotation(K::com));
  EXPECT_TRUE(needs_dpc_rotation(K::dpc));
  EXPECT_TRUE(needs_dpc_rotation(K::idpc));
  EXPECT_EQ(*preset_radii(K::bf, 3), std::make_pair(0.0, 3.0));
  EXPECT_EQ(*preset_radii(K::abf, 3), std::make_pair(1.5, 3.0));
  EXPECT_EQ(*preset_radii(K::adf, 3), std::make_pair(3.0, 6.0));
  EXPECT_EQ(*preset_radii(K::haadf, 3), std::make_pair(6.0, 12.0));
  EXPECT_TRUE(std::isinf(preset_radii(K::df, 3)->second));
  EXPECT_FALSE(preset_radii(K::mask, 3));
  EXPECT_FALSE(preset_radii(K::com, 3));
  EXPECT_EQ(*preset_radii("adf", 2.5), *preset_radii(K::adf, 2.5));  // the by-name form agrees
}

// ---- calibration

Acquisition calibrated(std::optional<double> angle, const std::string& angle_units = "mrad") {
  Acquisition acq;
  acq.beam_energy_ev = 200e3;
  acq.convergence_semi_angle_mrad = 20;
  acq.metadata["entry/sample/simulation/scan_step"] = {{"value", 0.05}, {"units", "nm"}};
  if (angle) acq.metadata["entry/sample/simulation/detector_angle_per_pixel"] = {{"value", *angle}, {"units", angle_units}};
  return acq;
}

LoadRequest bins(uint64_t scan, uint64_t detector) {
  LoadRequest r;
  r.scan_bin = {scan, scan};
  r.detector_bin = {detector, detector};
  return r;
}

TEST(StemCalibration, AngularPixelSizeFromTheOverrideScaledByTheBin) {
  const Acquisition acq = calibrated(0.5);
  const Sourced semi = convergence_semiangle_mrad(acq, {std::nullopt, "--semiangle-mrad"});
  const Sourced s = detector_angle_per_pixel(acq, bins(1, 2), {0.7, "--detector-mrad-per-px"}, semi, 8);
  ASSERT_TRUE(s.known());
  EXPECT_DOUBLE_EQ(s.value, 1.4);
  EXPECT_EQ(s.source, "--detector-mrad-per-px");
  EXPECT_EQ(s.unit, "mrad");
}

TEST(StemCalibration, AngularPixelSizeFromTheFileConvertedAndScaled) {
  const Sourced semi{20, "mrad", "file: convergence_semi_angle", ""};
  const Override none{std::nullopt, "--detector-mrad-per-px"};
  Sourced s = detector_angle_per_pixel(calibrated(0.5), bins(1, 2), none, semi, 8);
  EXPECT_DOUBLE_EQ(s.value, 1.0);
  EXPECT_EQ(s.source, "file: entry/sample/simulation/detector_angle_per_pixel");
  s = detector_angle_per_pixel(calibrated(0.0005, "rad"), bins(1, 1), none, semi, 8);
  EXPECT_DOUBLE_EQ(s.value, 0.5);
  // Unknown units: the file's value is not used; the derivation applies.
  s = detector_angle_per_pixel(calibrated(0.5, "furlong"), bins(1, 1), none, semi, 8);
  EXPECT_DOUBLE_EQ(s.value, 2.5);
  EXPECT_EQ(s.source, "convergence semi-angle / bright-field disk radius");
  // Unequal detector bins: no single angular pixel size.
  LoadRequest unequal;
  unequal.detector_bin = {2, 1};
  s = detector_angle_per_pixel(calibrated(0.5), unequal, none, semi, 8);
  EXPECT_FALSE(s.known());
  EXPECT_NE(s.missing.find("2 x 1"), std::string::npos) << s.missing;
  EXPECT_NE(invalid_argument([&] { require_positive(s, "detector angle per pixel"); }).find("binned 2 x 1"), std::string::npos);
}

TEST(StemCalibration, AngularPixelSizeDerivedFromTheSemiAngleAndTheDisk) {
  const Acquisition acq = calibrated(std::nullopt);
  const Override none{std::nullopt, "--detector-mrad-per-px"};
  Sourced semi = convergence_semiangle_mrad(acq, {std::nullopt, "--semiangle-mrad"});
  EXPECT_EQ(semi.source, "file: convergence_semi_angle");
  Sourced s = detector_angle_per_pixel(acq, bins(1, 2), none, semi, 8);  // the radius is in binned pixels already
  EXPECT_DOUBLE_EQ(s.value, 2.5);
  EXPECT_EQ(s.source, "convergence semi-angle / bright-field disk radius");
  semi = convergence_semiangle_mrad(acq, {19, "--semiangle-mrad"});
  EXPECT_EQ(semi.source, "--semiangle-mrad");
  EXPECT_DOUBLE_EQ(detector_angle_per_pixel(acq, bins(1, 1), none, semi, 4).value, 4.75);
  // Neither the file's size nor a semi-angle: missing, and the message says what to give.
  Acquisition bare;
  semi = convergence_semiangle_mrad(bare, {std::nullopt, "--semiangle-mrad"});
  EXPECT_FALSE(semi.known());
  s = detector_angle_per_pixel(bare, bins(1, 1), none, semi, 8);
  EXPECT_FALSE(s.known());
  const std::string msg = invalid_argument([&] { require_positive(s, "detector angle per pixel"); });
  EXPECT_NE(msg.find("--semiangle-mrad"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--detector-mrad-per-px"), std::string::npos) << msg;
  EXPECT_TRUE(to_json(s)["value"].is_null());
  EXPECT_EQ(to_json(s)["missing"], s.missing);
}

TEST(StemCalibration, EnergyStepAndPositivity) {
  const Acquisition acq = calibrated(0.5);
  Sourced e = beam_energy_ev(acq, {std::nullopt, "--kv"});
  EXPECT_EQ(e.value, 200e3);
  EXPECT_EQ(e.source, "file: beam energy");
  e = beam_energy_ev(acq, {300e3, "--kv"});
  EXPECT_EQ(e.source, "--kv");
  EXPECT_EQ(to_json(e), nlohmann::json({{"value", 300e3}, {"unit", "eV"}, {"source", "--kv"}}));
  Sourced step = scan_step_A(acq, bins(3, 1), {std::nullopt, "--scan-step-A"});  // 0.05 nm = 0.5 A, x 3
  EXPECT_DOUBLE_EQ(step.value, 1.5);
  EXPECT_EQ(step.source, "file: entry/sample/simulation/scan_step");
  EXPECT_EQ(step.unit, "angstrom");
  step = scan_step_A(Acquisition{}, bins(1, 1), {std::nullopt, "--scan-step-A"});
  EXPECT_EQ(invalid_argument([&] { require_positive(step, "scan step"); }),
            "the file does not record the scan step; give --scan-step-A");
  step = scan_step_A(acq, bins(1, 1), {-1, "--scan-step-A"});
  EXPECT_EQ(invalid_argument([&] { require_positive(step, "scan step"); }), "the scan step (--scan-step-A) must be a positive number");
}

// ---- the bright-field disk

// A 32 × 32 pattern: 10 inside the float32 distance 5 of (12, 14), 1 outside; its disk by the contract.
std::vector<double> disk_pattern(uint64_t* area) {
  std::vector<double> p(32 * 32, 1.0);
  *area = 0;
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 32; ++c)
      if (std::hypot(r - 12.0, c - 14.0) <= 5) p[r * 32 + c] = 10, ++*area;
  return p;
}

TEST(StemDetectorGeometry, DiskGivenDetectedOrPartlyGiven) {
  uint64_t area = 0;
  const std::vector<double> pattern = disk_pattern(&area);
  int passes = 0;
  const auto mean = [&] {
    ++passes;
    return pattern;
  };
  ResolvedDisk d = resolve_bright_field_disk({std::array<double, 2>{11.25, 13.5}, 4.5}, mean, 32, 32);
  EXPECT_EQ(passes, 0);  // nothing read
  EXPECT_EQ(d.source, "given");
  EXPECT_EQ(d.disk.row, 11.25);
  EXPECT_EQ(d.disk.col, 13.5);
  EXPECT_EQ(d.disk.radius, 4.5);
  EXPECT_FALSE(to_json(d).contains("area"));

  d = resolve_bright_field_disk({}, mean, 32, 32);
  EXPECT_EQ(passes, 1);
  EXPECT_EQ(d.source, "detected");
  EXPECT_DOUBLE_EQ(d.disk.row, 12);
  EXPECT_DOUBLE_EQ(d.disk.col, 14);
  EXPECT_EQ(d.disk.area, area);
  EXPECT_DOUBLE_EQ(d.disk.radius, std::sqrt(static_cast<double>(area) / M_PI));
  EXPECT_EQ(to_json(d)["area"], area);

  d = resolve_bright_field_disk({std::array<double, 2>{11.5, 13.25}, std::nullopt}, mean, 32, 32);
  EXPECT_EQ(d.source, "detected, partly given");
  EXPECT_EQ(d.disk.row, 11.5);
  EXPECT_EQ(d.disk.col, 13.25);
  EXPECT_DOUBLE_EQ(d.disk.radius, std::sqrt(static_cast<double>(area) / M_PI));
  d = resolve_bright_field_disk({std::nullopt, 3.0}, mean, 32, 32);
  EXPECT_EQ(d.source, "detected, partly given");
  EXPECT_DOUBLE_EQ(d.disk.row, 12);
  EXPECT_EQ(d.disk.radius, 3.0);
  EXPECT_EQ(passes, 3);

  // A bad radius or centre is refused before anything is read.
  EXPECT_NE(invalid_argument([&] { resolve_bright_field_disk({std::nullopt, -2.0}, mean, 32, 32); }).find("must be > 0"),
            std::string::npos);
  EXPECT_NE(invalid_argument([&] {
              resolve_bright_field_disk({std::array<double, 2>{NAN, 1}, 2.0}, mean, 32, 32);
            }),
            "");
  EXPECT_EQ(passes, 3);
}

TEST(StemDetectorGeometry, ADiskRequestInBinnedPixels) {
  const DiskRequest d = binned({std::array<double, 2>{15.5, 7.0}, 8.0}, 2);
  EXPECT_DOUBLE_EQ((*d.center)[0], 7.5);
  EXPECT_DOUBLE_EQ((*d.center)[1], 3.25);
  EXPECT_DOUBLE_EQ(*d.radius, 4);
  EXPECT_FALSE(binned({}, 4).center);
  EXPECT_FALSE(binned({}, 4).radius);
}

// ---- virtual detectors

DetectorRequest of_kind(ProductKind k) {
  DetectorRequest r;
  r.kind = k;
  return r;
}

TEST(StemDetectorGeometry, ARectangleIsAMasksDetectorAlone) {
  const BrightFieldDisk disk{16, 15, 4, 0, 0};
  const Sourced angle{0.5, "mrad", "file: x/detector_angle_per_pixel", ""};
  DetectorRequest rect = of_kind(ProductKind::mask);
  rect.rect = DetectorRect{2, 3, 5, 7};
  const ResolvedDetector d = resolve_virtual_detector(rect, disk, {32, 32}, angle);
  EXPECT_EQ(d.kind, "rectangle");
  EXPECT_EQ(d.pixels, rectangle_pixels(32, 32, {2, 3, 5, 7}));
  EXPECT_EQ(d.pixels.size(), 12u);
  const nlohmann::json j = to_json(d);
  EXPECT_EQ(j["kind"], "rectangle");
  EXPECT_EQ(j["rect"], nlohmann::json({2, 3, 5, 7}));
  EXPECT_EQ(j["pixels"], 12);
  rect.inner_px = 1;  // with radii: refused, naming both
  EXPECT_NE(invalid_argument([&] { resolve_virtual_detector(rect, disk, {32, 32}, angle); }).find("--rect excludes"), std::string::npos);
  DetectorRequest bf = of_kind(ProductKind::bf);
  bf.rect = DetectorRect{2, 3, 5, 7};
  EXPECT_NE(invalid_argument([&] { resolve_virtual_detector(bf, disk, {32, 32}, angle); }).find("not bf's"), std::string::npos);
}

TEST(StemDetectorGeometry, DetectorsInPixelsAndMrad) {
  const BrightFieldDisk disk{16, 15, 4, 0, 0};
  const Sourced angle{0.5, "mrad", "file: x/detector_angle_per_pixel", ""};
  const std::array<uint64_t, 2> frame{32, 32};

  ResolvedDetector d = resolve_virtual_detector(of_kind(ProductKind::haadf), disk, frame, angle);
  EXPECT_EQ(d.inner_px, 8);
  EXPECT_EQ(d.outer_px, 16);
  EXPECT_EQ(d.pixels, annulus_pixels(32, 32, 16, 15, 8, 16));
  nlohmann::json j = to_json(d);
  EXPECT_EQ(j["given_in"], "pixels");
  EXPECT_EQ(j["inner_mrad"], 4.0);
  EXPECT_EQ(j["outer_mrad"], 8.0);
  EXPECT_EQ(j["angle_per_pixel"]["source"], "file: x/detector_angle_per_pixel");
  EXPECT_EQ(j["pixels"], d.pixels.size());

  DetectorRequest mrad = of_kind(ProductKind::mask);
  mrad.inner_mrad = 1, mrad.outer_mrad = 3;
  d = resolve_virtual_detector(mrad, disk, frame, angle);
  EXPECT_EQ(d.given_in, "mrad");
  EXPECT_EQ(d.inner_px, 2);
  EXPECT_EQ(d.outer_px, 6);
  EXPECT_EQ(d.pixels, annulus_pixels(32, 32, 16, 15, 2, 6));
  // Without an angular pixel size, mrad radii are refused with the reason; pixel radii still work (no mrad read-out).
  const Sourced unknown{NAN, "mrad", "", "no angular pixel size here"};
  EXPECT_EQ(invalid_argument([&] { resolve_virtual_detector(mrad, disk, frame, unknown); }), "no angular pixel size here");

  DetectorRequest px = of_kind(ProductKind::mask);
  px.inner_px = 3;
  d = resolve_virtual_detector(px, disk, frame, unknown);
  EXPECT_TRUE(std::isinf(d.outer_px));
  j = to_json(d);
  EXPECT_EQ(j["outer_px"], "inf");
  EXPECT_FALSE(j.contains("inner_mrad"));
  EXPECT_EQ(d.pixels, annulus_pixels(32, 32, 16, 15, 3, std::numeric_limits<double>::infinity()));
  j = to_json(resolve_virtual_detector(px, disk, frame, angle));
  EXPECT_EQ(j["inner_mrad"], 1.5);
  EXPECT_EQ(j["outer_mrad"], "inf");

  px.outer_px = 0;
  EXPECT_NE(invalid_argument([&] { resolve_virtual_detector(px, disk, frame, angle); }).find("--outer must be > 0"), std::string::npos);
  px.outer_px = 2;  // below inner
  EXPECT_NE(invalid_argument([&] { resolve_virtual_detector(px, disk, frame, angle); }), "");
  EXPECT_NE(invalid_argument([&] { resolve_virtual_detector(of_kind(ProductKind::mask), disk, frame, angle); }), "");
  EXPECT_NE(invalid_argument([&] { resolve_virtual_detector(of_kind(ProductKind::com), disk, frame, angle); }), "");
}

// ---- DPC rotation

ScanField gradient(uint64_t n) {  // ∇ of exp(-((r-12)² + (c-9)²)/40) + 0.02 r c: curl-free
  ScanField g;
  g.rows = g.cols = n;
  g.u.resize(n * n), g.v.resize(n * n);
  for (uint64_t r = 0; r < n; ++r)
    for (uint64_t c = 0; c < n; ++c) {
      const double x = static_cast<double>(r), y = static_cast<double>(c);
      const double e = std::exp(-((x - 12) * (x - 12) + (y - 9) * (y - 9)) / 40);
      g.u[r * n + c] = -e * (x - 12) / 20 + 0.02 * y;
      g.v[r * n + c] = -e * (y - 9) / 20 + 0.02 * x;
    }
  return g;
}

TEST(StemDpcRotation, FoundOrGiven) {
  const ScanField measured = rotate_field(gradient(24), -1.2, false);
  const ResolvedDpcRotation found = resolve_dpc_rotation(measured, {});
  EXPECT_TRUE(found.found);
  EXPECT_EQ(found.source, "found (minimum mean squared curl)");
  EXPECT_LT(std::abs(std::remainder(found.rotation.angle - 1.2, M_PI)), 1e-3);
  const DpcRotation direct = find_dpc_rotation(measured);
  EXPECT_EQ(found.rotation.angle, direct.angle);
  EXPECT_EQ(found.rotated.u, rotate_field(measured, direct.angle, direct.transpose).u);
  nlohmann::json j = to_json(found);
  EXPECT_EQ(j["curl2_other_transpose"], direct.curl2_other);
  EXPECT_DOUBLE_EQ(j["angle_deg"].get<double>(), direct.angle * 180 / M_PI);

  const ResolvedDpcRotation given = resolve_dpc_rotation(measured, {30.0, true});
  EXPECT_FALSE(given.found);
  EXPECT_EQ(given.source, "given");
  EXPECT_DOUBLE_EQ(given.rotation.angle, M_PI / 6);
  EXPECT_TRUE(given.rotation.transpose);
  const ScanField want = rotate_field(measured, M_PI / 6, true);
  EXPECT_EQ(given.rotated.u, want.u);
  EXPECT_EQ(given.rotated.v, want.v);
  double curl2 = 0, div2 = 0;
  curl_div(want, &curl2, &div2);
  EXPECT_EQ(given.rotation.curl2, curl2);
  EXPECT_EQ(given.rotation.div2, div2);
  EXPECT_GT(given.rotation.curl2, found.rotation.curl2);  // a wrong rotation leaves curl
  j = to_json(given);
  EXPECT_FALSE(j.contains("curl2_other_transpose"));
  EXPECT_EQ(j["transpose"], true);
}

// ---- SSB setup

TEST(StemSsbSetup, ScanRotationCandidatesAndTheLowerLoss) {
  DpcRotation dpc;
  dpc.angle = 30 * M_PI / 180;
  std::vector<double> asked;
  SsbRotationSearch s = choose_ssb_scan_rotation(dpc, [&](double deg) {
    asked.push_back(deg);
    return std::abs(deg - 330) < 1e-9 ? 1.0 : 2.0;
  });
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_NEAR(asked[0], 150, 1e-12);
  EXPECT_NEAR(asked[1], 330, 1e-12);
  EXPECT_EQ(s.chosen, 1);
  EXPECT_NEAR(s.rotation.value, 330, 1e-12);
  EXPECT_EQ(s.rotation.unit, "degree");
  EXPECT_EQ(to_json(s)["losses"], nlohmann::json({2.0, 1.0}));
  s = choose_ssb_scan_rotation(dpc, [](double) { return 1.0; });  // a tie keeps the base candidate
  EXPECT_EQ(s.chosen, 0);
  EXPECT_NEAR(s.rotation.value, 150, 1e-12);
}

TEST(StemSsbSetup, HigherOrderAberrationsByName) {
  Aberrations ab;
  set_higher_order(ab, "C23", 100, 30);
  set_higher_order(ab, "C30", 6e5, 0);
  const nlohmann::json j = to_json(ab);
  EXPECT_EQ(j, nlohmann::json({{"C10", 0.0}, {"C12", 0.0}, {"phi12", 0.0}, {"C23", 100.0}, {"phi23", 30.0}, {"C30", 6e5}}));
  EXPECT_NE(invalid_argument([&] { set_higher_order(ab, "C30", 1, 5); }).find("no azimuth"), std::string::npos);
  EXPECT_NE(invalid_argument([&] { set_higher_order(ab, "C77", 1, 0); }).find("C21, C23"), std::string::npos);
  EXPECT_NE(invalid_argument([&] { set_higher_order(ab, "C34", NAN, 0); }).find("finite"), std::string::npos);
}

// The products' and SSB's resolution on a simulated file: the same disk, and the file's angular pixel size.
using test::cpu_planner;

TEST(StemSsbSetup, ProductsAndSsbResolveTheSameGeometry) {
  test::TempFolder dir("domain");
  StemSimulationParams p;
  p.scan_rows = p.scan_cols = 6, p.detector = 32;
  DectrisWriterOptions o;
  o.folder = dir.str();
  const Acquisition acq = open_acquisition(write_simulated_acquisition(p, o, 1));
  const StemSimulator sim(p);
  LoadRequest load;
  load.detector_bin = {2, 2};
  std::vector<Placement> placements;
  const DetectorGeometry g = resolve_detector_geometry(acq, load, {}, {std::nullopt, "--semiangle-mrad"},
                                                       {std::nullopt, "--detector-mrad-per-px"}, cpu_planner(), &placements);
  ASSERT_EQ(placements.size(), 2u);  // the pattern pass, and where its chunks were decoded
  EXPECT_EQ(placements[0].op, "stem.pattern_reduce");
  EXPECT_EQ(placements[1].op, "decode.bitshuffle_lz4");
  EXPECT_EQ(placements[1].backend, "cpu");
  EXPECT_EQ(g.disk.source, "detected");
  EXPECT_EQ(g.angle_per_pixel.source, "file: entry/sample/simulation/detector_angle_per_pixel");
  EXPECT_DOUBLE_EQ(g.angle_per_pixel.value, 2 * sim.detector_mrad_per_px());

  SsbSetupRequest r;
  r.energy_ev = {std::nullopt, "--kv"}, r.semiangle_mrad = {std::nullopt, "--semiangle-mrad"};
  r.scan_step_A = {std::nullopt, "--scan-step-A"}, r.detector_mrad_per_px = {std::nullopt, "--detector-mrad-per-px"};
  const SsbSetup s = resolve_ssb_setup(acq, load, r, cpu_planner(), &placements);
  EXPECT_EQ(to_json(s.geometry.disk), to_json(g.disk));
  EXPECT_EQ(s.geometry.angle_per_pixel.value, g.angle_per_pixel.value);
  EXPECT_TRUE(s.excluded_pixels.empty());  // binned: the load zeroes bad pixels, none is excluded by index
  const SsbCalibration cal = s.calibration(25);
  EXPECT_EQ(cal.energy_ev, p.energy_ev);
  EXPECT_EQ(cal.scan_rotation_deg, 25);
  EXPECT_EQ(cal.disk_radius_px, g.disk.disk.radius);
  const nlohmann::json j = ssb_calibration_json(s, {25, "degree", "--scan-rotation-deg", ""});
  EXPECT_EQ(j["scan_rotation"]["source"], "--scan-rotation-deg");
  EXPECT_DOUBLE_EQ(j["wavelength_A"].get<double>(), electron_wavelength_A(p.energy_ev));
  // Unbinned: the file's bad pixels are excluded by index.
  const SsbSetup unbinned = resolve_ssb_setup(acq, LoadRequest{}, r, cpu_planner(), &placements);
  uint64_t bad = 0;
  for (uint32_t m : acq.pixel_mask) bad += m > 0;
  EXPECT_GT(bad, 0u);
  EXPECT_EQ(unbinned.excluded_pixels.size(), bad);
}

}  // namespace
}  // namespace tmorph
