// Single-sideband ptychography preview against the simulator's ground truth: the reconstructed phase
// correlates with the true object phase at the probed positions; the right defocus beats none and the
// wrong sign of χ; a rotated scan is reconstructed with the matching rotation and not with a wrong one;
// χ's azimuth convention; bad calibration and an over-budget request are refused with clear messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "stem/demo/simulate.h"
#include "stem/ssb/ssb.h"
#include "stem/ssb/ssb_fit.h"
#include "tensormorph/error.h"
#include "ssb_sim_support.h"
#include "test_support.h"

namespace tmorph {
namespace {

using test::cpu_planner;
using test::pearson;
using test::SimData;


StemSimulationParams standard(double rotation_deg = 0) {
  StemSimulationParams p;
  p.scan_rows = p.scan_cols = 48;
  p.detector = 64;
  p.dose = 20000;
  p.defocus_nm = 5;
  p.scan_rotation_deg = rotation_deg;
  return p;
}

const SimData& unrotated() {
  static const SimData d(standard());
  return d;
}

TEST(Ssb, PhaseCorrelatesWithTheTruePhase) {
  const SimData& d = unrotated();
  const SsbResult r = d.run(d.calibration(), d.p.defocus_nm * 10);
  ASSERT_EQ(r.rows, 48u);
  ASSERT_EQ(r.cols, 48u);
  ASSERT_EQ(r.phase.size(), 48u * 48u);
  const double rho = pearson(r.phase, d.truth);
  std::printf("[ssb] 48x48 scan, K=64, dose 20000, C10=50 A: Pearson %.4f, loss %.5f, B=%llu, %.3f s\n", rho, r.loss,
              static_cast<unsigned long long>(r.bf_pixels), r.seconds);
  EXPECT_GT(rho, 0.95);  // the phase's sign: positive at the atoms
  EXPECT_GT(r.bf_pixels, 150u);
  // A weak phase object: the amplitude stays near 1 and the phase small.
  double amp = 0, maxabs = 0;
  for (size_t i = 0; i < r.phase.size(); ++i) amp += r.amplitude[i], maxabs = std::max(maxabs, std::abs(r.phase[i]));
  amp /= static_cast<double>(r.phase.size());
  EXPECT_NEAR(amp, 1.0, 0.1);
  EXPECT_LT(maxabs, 1.0);
}

// At 10 nm defocus (χ ≈ 6.4 rad at the aperture edge) the conventions matter a lot; at the standard 5 nm the
// lattice's few strong frequencies still correlate without correction, so the margin is smaller there.
TEST(Ssb, TheRightDefocusBeatsNoneAndTheWrongSign) {
  StemSimulationParams p = standard();
  p.defocus_nm = 10;
  const SimData strong(p);
  for (const SimData* d : {&unrotated(), &strong}) {
    const double c10 = d->p.defocus_nm * 10;
    const SsbResult right = d->run(d->calibration(), c10), none = d->run(d->calibration(), 0), flipped = d->run(d->calibration(), -c10);
    const double r_right = pearson(right.phase, d->truth), r_none = pearson(none.phase, d->truth), r_flip = pearson(flipped.phase, d->truth);
    std::printf("[ssb] defocus %g nm, Pearson: C10=+%g %.4f, C10=0 %.4f, C10=-%g (chi sign flipped) %.4f; loss %.5f / %.5f / %.5f\n",
                d->p.defocus_nm, c10, r_right, r_none, c10, r_flip, right.loss, none.loss, flipped.loss);
    const double margin = d->p.defocus_nm >= 10 ? 0.3 : 0.03;
    EXPECT_GT(r_right, 0.94);
    EXPECT_GT(r_right, r_none + margin);
    EXPECT_GT(r_right, r_flip + margin);
    EXPECT_LT(right.loss, none.loss);
    EXPECT_LT(right.loss, flipped.loss);
  }
}

// The simulator puts scan position (r, c) at R(θ)·(r, c)·step: reconstructing with scan_rotation_deg = θ is
// right, 0 and −θ are not (10 nm defocus, where the rotation of ν against k_b matters).
TEST(Ssb, ARotatedScanNeedsTheMatchingRotation) {
  StemSimulationParams p = standard(30);
  p.defocus_nm = 10;
  const SimData d(p);
  SsbCalibration cal = d.calibration();
  const double c10 = d.p.defocus_nm * 10;
  std::map<double, double> rho, loss;
  for (double deg : {30.0, 0.0, -30.0}) {
    cal.scan_rotation_deg = deg;
    const SsbResult r = d.run(cal, c10);
    rho[deg] = pearson(r.phase, d.truth), loss[deg] = r.loss;
  }
  std::printf("[ssb] simulated 30 deg, defocus 10 nm: Pearson (loss) with rotation 30 %.4f (%.5f), 0 %.4f (%.5f), -30 %.4f (%.5f)\n",
              rho[30.0], loss[30.0], rho[0.0], loss[0.0], rho[-30.0], loss[-30.0]);
  EXPECT_GT(rho[30.0], 0.93);
  EXPECT_GT(rho[30.0], rho[0.0] + 0.1);
  EXPECT_GT(rho[30.0], rho[-30.0] + 0.1);
  EXPECT_LT(loss[30.0], loss[0.0]);
  EXPECT_LT(loss[30.0], loss[-30.0]);
}

TEST(Ssb, ResultsDoNotDependOnThreadsOrTheFrameSource) {
  const SimData& d = unrotated();
  const SsbResult one = d.run(d.calibration(), 50, 1), three = d.run(d.calibration(), 50, 3);
  for (size_t i = 0; i < one.phase.size(); ++i) ASSERT_NEAR(one.phase[i], three.phase[i], 1e-9);
  EXPECT_NEAR(one.loss, three.loss, 1e-9);
  // A resident array gives the same numbers as a streamed source.
  StemArray a;
  const uint64_t K = d.p.detector, N = d.p.scan_rows * d.p.scan_cols;
  a.shape = {d.p.scan_rows, d.p.scan_cols, K, K};
  a.dtype = DType::U16;
  a.bytes = N * K * K * 2;
  a.data = LargeBuffer(a.bytes);
  std::memcpy(a.data.get(), d.frames.data(), a.bytes);
  SsbFrames f = ssb_frames_from_array(a);
  f.excluded_pixels = d.source().excluded_pixels;
  Aberrations ab;
  ab.C10_A = 50;
  const SsbResult r = ssb_reconstruct(f, d.p.scan_rows, d.p.scan_cols, K, K, d.calibration(), ab, 1, 0, cpu_planner());
  EXPECT_EQ(r.phase, one.phase);
  // Bright-field values handed over in odd-sized pieces (as other MPI ranks send them, distributed_ssb.h) give the
  // same phase, amplitude and loss bit for bit; the pieces arrive in position order with the frame batches.
  SsbFrames values;
  values.dtype = DType::U16;
  values.excluded_pixels = f.excluded_pixels;
  values.batch_bytes = 7 * K * K * 2;  // 7 frames per batch: batches straddle scan rows
  uint64_t next = 0;
  values.fill_bright_field = [&](uint64_t first, uint64_t count, const std::vector<uint32_t>& pixels, float* out) {
    ASSERT_EQ(first, next);
    ASSERT_EQ(pixels, ssb_bright_field_pixels(K, K, d.calibration(), f.excluded_pixels));
    for (uint64_t p = 0; p < count; p += 3)
      ssb_extract_bright_field(a.data.get() + (first + p) * K * K * 2, DType::U16, std::min<uint64_t>(3, count - p), K * K, pixels,
                               out + p * pixels.size());
    next = first + count;
  };
  const SsbResult v = ssb_reconstruct(values, d.p.scan_rows, d.p.scan_cols, K, K, d.calibration(), ab, 3, 0, cpu_planner());
  EXPECT_EQ(next, N);
  EXPECT_EQ(v.phase, r.phase);
  EXPECT_EQ(v.amplitude, r.amplitude);
  EXPECT_EQ(v.loss, r.loss);
}

TEST(Ssb, ChiConventions) {
  const double lambda = electron_wavelength_A(300e3), k = 0.5;  // 1/Å
  const double base = M_PI / lambda * (lambda * k) * (lambda * k);
  Aberrations ab;
  ab.C10_A = 100, ab.C12_A = 20, ab.phi12_deg = 0;
  // φ is measured from +column towards +row: along +column φ = 0, along +row φ = 90°.
  EXPECT_NEAR(ssb_chi(0, k, lambda, ab), base * 120, 1e-9);
  EXPECT_NEAR(ssb_chi(k, 0, lambda, ab), base * 80, 1e-9);
  ab.phi12_deg = 45;  // the astigmatism's strong axis on the (+row, +col) diagonal, weak on (+row, −col)
  EXPECT_NEAR(ssb_chi(k / std::sqrt(2), k / std::sqrt(2), lambda, ab), base * 120, 1e-9);
  EXPECT_NEAR(ssb_chi(k / std::sqrt(2), -k / std::sqrt(2), lambda, ab), base * 80, 1e-9);
  EXPECT_EQ(ssb_chi(0, 0, lambda, ab), 0.0);
  // The simulator's defocus: χ = (π/λ)(λk)²·C10 with C10 = defocus_nm·10, the same sign.
  Aberrations df;
  df.C10_A = 50;
  EXPECT_NEAR(ssb_chi(0.3, 0.4, lambda, df), M_PI / lambda * (lambda * 0.5) * (lambda * 0.5) * 50, 1e-12);
}

TEST(Ssb, HigherOrderChiInKrivanekNotation) {
  const double lambda = electron_wavelength_A(300e3), k = 0.8, alpha = lambda * k;
  const auto with = [](const char* name, double value, double angle = 0) {
    Aberrations ab;
    for (int i = 0; i < kHigherOrders; ++i)
      if (std::string(kHigherOrderNames[i]) == name) ab.higher_A[i] = value, ab.higher_deg[i] = angle;
    return ab;
  };
  // C30 (Cs): (2π/λ)·C30·α⁴/4, round.
  EXPECT_NEAR(ssb_chi(0, k, lambda, with("C30", 1e5)), 2 * M_PI / lambda * 1e5 * std::pow(alpha, 4) / 4, 1e-9);
  EXPECT_NEAR(ssb_chi(k, 0, lambda, with("C30", 1e5)), ssb_chi(0, -k, lambda, with("C30", 1e5)), 1e-9);
  // C23 (three-fold, n = 2, m = 3) at φ23 = 90°: largest along +row (φ = 90°), and cos 3(φ − 90°) = −1 along +column.
  const double c23 = 2 * M_PI / lambda * 1e3 * std::pow(alpha, 3) / 3;
  EXPECT_NEAR(ssb_chi(k, 0, lambda, with("C23", 1e3, 90)), c23, 1e-9);
  EXPECT_NEAR(ssb_chi(0, k, lambda, with("C23", 1e3, 90)), 0.0, 1e-9);  // cos(−270°) = 0
  EXPECT_NEAR(ssb_chi(-k, 0, lambda, with("C23", 1e3, 90)), -c23, 1e-9);
  // C21 (coma, n = 2, m = 1) at φ21 = 0: odd in k.
  EXPECT_NEAR(ssb_chi(0, k, lambda, with("C21", 500)), -ssb_chi(0, -k, lambda, with("C21", 500)), 1e-9);
  EXPECT_TRUE(ssb_quadratic(Aberrations{100, 20, 5}));
  EXPECT_FALSE(ssb_quadratic(with("C56", 1)));
}

TEST(Ssb, TheDirectOverlapAgreesWithTheSeparableOne) {
  // A negligible C56 sends evaluate() down the direct Γ path; it must give what the separable path gives.
  const SimData& d = unrotated();
  const SsbProblem problem(d.source(), d.p.scan_rows, d.p.scan_cols, d.p.detector, d.p.detector, d.calibration(), 2, 0, cpu_planner());
  Aberrations quadratic{50, 20, 30};
  Aberrations direct = quadratic;
  direct.higher_A[kHigherOrders - 1] = 1e-30;
  const SsbResult a = problem.evaluate(quadratic, 10), b = problem.evaluate(direct, 10);
  double worst = 0;
  for (size_t i = 0; i < a.phase.size(); ++i) worst = std::max(worst, std::abs(a.phase[i] - b.phase[i]));
  EXPECT_LT(worst, 1e-5);
  EXPECT_NEAR(a.loss, b.loss, 1e-7 * a.loss);
}

TEST(Ssb, SphericalAberrationIsCorrectedWhenGiven) {
  StemSimulationParams p = standard();
  p.cs_um = 60;  // χ_C30 = (π/2λ)·C30·α⁴ ≈ 7.7 rad at the aperture edge
  const SimData d(p);
  const SsbProblem problem(d.source(), p.scan_rows, p.scan_cols, p.detector, p.detector, d.calibration(), 2, 0, cpu_planner());
  Aberrations with_cs{50, 0, 0};
  with_cs.higher_A[2] = 60e4;  // C30 in Å
  ASSERT_STREQ(kHigherOrderNames[2], "C30");
  const SsbResult right = problem.evaluate(with_cs, 0), none = problem.evaluate({50, 0, 0}, 0);
  Aberrations flipped = with_cs;
  flipped.higher_A[2] = -60e4;
  const SsbResult wrong = problem.evaluate(flipped, 0);
  const double r_right = pearson(right.phase, d.truth), r_none = pearson(none.phase, d.truth), r_wrong = pearson(wrong.phase, d.truth);
  std::printf("[ssb] C30 = 60 um, C10 = 50 A: Pearson with C30 %.4f (loss %.5f), without %.4f (%.5f), C30 sign flipped %.4f (%.5f)\n",
              r_right, right.loss, r_none, none.loss, r_wrong, wrong.loss);
  EXPECT_GE(r_right, 0.90);  // 0.927: a large Cs leaves the probe's tails in the border positions
  EXPECT_LT(r_none, r_right - 0.05);
  EXPECT_LT(r_wrong, r_right - 0.05);
  EXPECT_LT(right.loss, none.loss);
}

// stem.ssb_overlap on Vulkan against the CPU reference (lavapipe here; any Vulkan device): a non-square,
// rotated scan with defocus and astigmatism, small bindings so that the pixels run in many batches. The
// phase within 2e-4 rad and the loss within 1e-5 relative (the bound the Vulkan kernel declares); two
// Vulkan runs byte-identical; higher orders fall back to the CPU and the placement says why.
TEST(SsbVulkan, MatchesTheCpuWithinTheStatedBoundAndFallsBackForHigherOrders) {
  setenv("TENSORMORPH_VULKAN_CHUNK_BYTES", "262144", 1);  // read when a Vulkan call runs: many batches
  struct Unset {
    ~Unset() { unsetenv("TENSORMORPH_VULKAN_CHUNK_BYTES"); }
  } unset;
  BackendRegistry registry;
  registry.register_table(cpu::cpu_backend_table(), "static");
  registry.load_plugins_from(TM_PLUGIN_DIR);
  const Backend* vulkan = registry.find("vulkan");
  if (!vulkan || !vulkan->available) {
    const char* require = std::getenv("TM_REQUIRE_VULKAN");
    if (require && std::string(require) == "1") FAIL() << "TM_REQUIRE_VULKAN=1 but the Vulkan backend is unavailable";
    GTEST_SKIP() << "Vulkan backend unavailable (install mesa-vulkan-drivers)";
  }
  StemSimulationParams p = standard();
  p.scan_rows = 40, p.scan_cols = 56, p.scan_rotation_deg = 25;
  const SimData d(p);
  const CostModel costs;
  Constraints on_vulkan;
  on_vulkan.prefer = {"vulkan"};
  const Planner cpu(registry, costs, Constraints{}), gpu(registry, costs, on_vulkan);
  const SsbCalibration cal = d.calibration();
  const SsbProblem reference(d.source(), p.scan_rows, p.scan_cols, p.detector, p.detector, cal, 2, 0, cpu);
  const SsbProblem candidate(d.source(), p.scan_rows, p.scan_cols, p.detector, p.detector, cal, 2, 0, gpu);
  for (const Aberrations& ab : {Aberrations{p.defocus_nm * 10, 0, 0}, Aberrations{120, 35, -40}}) {
    const SsbResult want = reference.evaluate(ab, cal.scan_rotation_deg);
    const SsbResult got = candidate.evaluate(ab, cal.scan_rotation_deg);
    EXPECT_EQ(want.placement.backend, "cpu");
    EXPECT_EQ(got.placement.backend, "vulkan");
    EXPECT_EQ(got.placement.precision, "bounded(0.0002)");
    ASSERT_EQ(got.phase.size(), want.phase.size());
    double worst = 0;
    for (size_t i = 0; i < want.phase.size(); ++i) {
      double diff = std::fabs(got.phase[i] - want.phase[i]);
      diff = std::min(diff, 2 * M_PI - diff);  // phases near ±π
      worst = std::max(worst, diff);
    }
    std::printf("[ssb-vulkan] C10 %g A, C12 %g A: max |phase diff| %.3g rad, loss %.9g (cpu) %.9g (vulkan), %.3f s vs %.3f s\n",
                ab.C10_A, ab.C12_A, worst, want.loss, got.loss, want.seconds, got.seconds);
    EXPECT_LE(worst, 2e-4);
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss);
    const SsbResult again = candidate.evaluate(ab, cal.scan_rotation_deg);
    EXPECT_EQ(std::memcmp(again.phase.data(), got.phase.data(), got.phase.size() * sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(&again.loss, &got.loss, sizeof(double)), 0);
  }
  Aberrations cs{p.defocus_nm * 10, 0, 0};
  cs.higher_A[2] = 1e5;  // C30: only the CPU computes the direct overlap
  const SsbResult fallback = candidate.evaluate(cs, cal.scan_rotation_deg);
  EXPECT_EQ(fallback.placement.backend, "cpu");
  bool vulkan_rejected = false;
  for (const Rejection& r : fallback.placement.rejected)
    vulkan_rejected |= r.backend == "vulkan" && r.reason == "dtype_unsupported";
  EXPECT_TRUE(vulkan_rejected) << "the placement must say why Vulkan did not take the higher orders";
  const SsbResult direct_cpu = reference.evaluate(cs, cal.scan_rotation_deg);
  EXPECT_EQ(std::memcmp(&direct_cpu.loss, &fallback.loss, sizeof(double)), 0);
}

// The op's contract is checked before anything runs: each malformed call is refused with a message naming
// what is wrong, never a crash or a silently wrong sum.
TEST(SsbOverlapOp, MalformedCallsAreRefusedWithTheReason) {
  const tm_backend_v1* cpu = cpu::cpu_backend_table();
  tm_kernel_cap_v1 cap{};
  uint32_t index = 0;
  for (; index < cpu->kernel_count(); ++index) {
    ASSERT_EQ(cpu->kernel_info(index, &cap), TM_OK);
    if (cap.op == TM_OP_STEM_SSB_OVERLAP) break;
  }
  ASSERT_LT(index, cpu->kernel_count());
  constexpr uint64_t R = 4, C = 6, N = R * C, stride = R * (C / 2 + 1), B = 2;
  std::vector<float> g(2 * B * stride, 1.0f);
  std::vector<double> k = {0.1, 0.0, 0.0, 0.1}, dc = {N * 1.0, N * 1.0}, nu(2 * N, 0.05), e(2 * N, 0.0);
  std::vector<double> rowf(2 * B * R, 1.0), colf(2 * B * C, 1.0), out(4 * N);
  for (uint64_t q = 0; q < N; ++q) e[2 * q] = 1;
  const tm_stem_ssb_params_v1 good{TM_SSB_QUADRATIC, 0, R, C, B, stride, 1.0, k.data(), dc.data(), nu.data(), e.data(),
                                   rowf.data(), colf.data(), nullptr, nullptr, 0};
  const auto call = [&](tm_stem_ssb_params_v1 p, uint64_t elements, uint64_t out_bytes, std::string* why) {
    tm_kernel_call_v1 c{};
    c.struct_size = sizeof c, c.op = TM_OP_STEM_SSB_OVERLAP, c.kernel_index = index, c.dtype = TM_DTYPE_F32;
    c.input = g.data(), c.element_count = elements, c.params = &p, c.params_size = sizeof p;
    c.output = out.data(), c.output_size = out_bytes, c.threads = 2;
    tm_message m{};
    const tm_status st = cpu->run(&c, &m);
    *why = m.text;
    return st;
  };
  std::string why;
  ASSERT_EQ(call(good, g.size(), out.size() * 8, &why), TM_OK) << why;
  for (double v : out) EXPECT_TRUE(std::isfinite(v));
  struct Bad {
    const char* what;
    tm_stem_ssb_params_v1 p;
    uint64_t elements, out_bytes;
  };
  std::vector<Bad> bad;
  auto p = good;
  p.variant = 7, bad.push_back({"unknown variant", p, g.size(), out.size() * 8});
  p = good, p.rows = 1, bad.push_back({"scan", p, g.size(), out.size() * 8});
  p = good, p.slice_stride = stride - 1, bad.push_back({"slice_stride", p, g.size(), out.size() * 8});
  p = good, p.pixels = 0, bad.push_back({"slice_stride", p, g.size(), out.size() * 8});
  p = good, p.pixels = uint64_t{1} << 40, bad.push_back({"slice_stride", p, g.size(), out.size() * 8});
  bad.push_back({"element_count", good, g.size() - 2, out.size() * 8});
  bad.push_back({"output too small", good, g.size(), out.size() * 8 - 8});
  p = good, p.nu = nullptr, bad.push_back({"nu are required", p, g.size(), out.size() * 8});
  p = good, p.row_factor = nullptr, bad.push_back({"row_factor", p, g.size(), out.size() * 8});
  p = good, p.kmax2 = std::nan(""), bad.push_back({"kmax2", p, g.size(), out.size() * 8});
  p = good, p.variant = TM_SSB_DIRECT, p.chi_term_count = 2, bad.push_back({"chi_terms", p, g.size(), out.size() * 8});
  for (const Bad& b : bad) {
    EXPECT_EQ(call(b.p, b.elements, b.out_bytes, &why), TM_ERR_INVALID_ARGUMENT) << b.what;
    EXPECT_NE(why.find(b.what), std::string::npos) << why << " lacks " << b.what;
  }
}

TEST(Ssb, BadInputsAreRefused) {
  StemSimulationParams p = standard();
  p.scan_rows = p.scan_cols = 8;
  p.detector = 32;
  const SimData d(p);
  const auto expect_error = [&](SsbCalibration cal, uint64_t budget, ErrorKind kind, const std::vector<std::string>& words,
                                uint64_t rows = 8) {
    try {
      ssb_reconstruct(d.source(), rows, 8, 32, 32, cal, Aberrations{}, 1, budget, cpu_planner());
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      for (const auto& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what() << " lacks " << w;
    }
  };
  const SsbCalibration good = d.calibration();
  EXPECT_NO_THROW(ssb_reconstruct(d.source(), 8, 8, 32, 32, good, Aberrations{}, 1, 0, cpu_planner()));
  SsbCalibration c = good;
  c.energy_ev = 0;
  expect_error(c, 0, ErrorKind::InvalidArgument, {"energy"});
  c = good, c.semiangle_mrad = -1;
  expect_error(c, 0, ErrorKind::InvalidArgument, {"semi-angle"});
  c = good, c.scan_step_A = 0;
  expect_error(c, 0, ErrorKind::InvalidArgument, {"scan step"});
  c = good, c.detector_mrad_per_px = std::nan("");
  expect_error(c, 0, ErrorKind::InvalidArgument, {"pixel size"});
  c = good, c.disk_row = 40;
  expect_error(c, 0, ErrorKind::InvalidArgument, {"outside", "32 x 32"});
  c = good, c.disk_radius_px = 0;
  expect_error(c, 0, ErrorKind::InvalidArgument, {"radius"});
  c = good, c.disk_row = 0.5, c.disk_col = 0.5, c.disk_radius_px = 0.1;
  expect_error(c, 0, ErrorKind::InvalidArgument, {"no bright-field pixel"});
  expect_error(good, 0, ErrorKind::InvalidArgument, {"2 x 2"}, 1);
  // Refused before any frame is read: a 4096 x 8 scan claimed over the 8 x 8 source.
  expect_error(good, 6 << 20, ErrorKind::PrecisionRefused,
               {"memory budget", "complex64", "crop the scan to", "bin the detector by", "use at most"}, 4096);
}

}  // namespace
}  // namespace tmorph
namespace tmorph {
namespace {

// A 48 × 48 scan with defocus and two-fold astigmatism, prepared once for the fit tests.
struct AstigmaticData {
  SimData d;
  explicit AstigmaticData(const StemSimulationParams& p) : d(p) {}
  static StemSimulationParams params() {
    StemSimulationParams p = standard();
    p.defocus_nm = 10, p.astigmatism_nm = 3, p.astigmatism_deg = 30;
    return p;
  }
  SsbProblem problem(unsigned threads) const {
    return SsbProblem(d.source(), d.p.scan_rows, d.p.scan_cols, d.p.detector, d.p.detector, d.calibration(), threads, 0, cpu_planner());
  }
};

const AstigmaticData& astigmatic() {
  static const AstigmaticData a(AstigmaticData::params());
  return a;
}

// A realistic prior: the defocus known to ±50 nm, the astigmatism below 10 nm.
SsbFitOptions realistic_box() {
  SsbFitOptions o;
  o.c10_low_nm = -50, o.c10_high_nm = 50, o.c12_high_nm = 10;
  o.search = SsbSearch::Wide;  // these tests exercise TPE + Nelder–Mead in a given box (ssb_fit_test.cpp: the default)
  return o;
}

}  // namespace

TEST(SsbFit, RecoversDefocusAndAstigmatism) {
  const AstigmaticData& a = astigmatic();
  const SsbProblem problem = a.problem(2);
  const SsbFit fit = ssb_fit_aberrations(problem, 0, realistic_box());
  const SsbResult r = problem.evaluate(fit.fitted, 0);
  const double rho = pearson(r.phase, a.d.truth);
  std::printf("[ssb-fit] truth C10 100 A, C12 30 A, phi12 30 deg; TPE best %.1f / %.1f / %.1f (loss %.6f); fitted %.1f / %.1f / %.1f "
              "(loss %.6f), %u trials + %u Nelder-Mead iterations (%u evaluations, converged %d), %.2f s; Pearson %.4f\n",
              fit.tpe_best.C10_A, fit.tpe_best.C12_A, fit.tpe_best.phi12_deg, fit.tpe_best_loss, fit.fitted.C10_A, fit.fitted.C12_A,
              fit.fitted.phi12_deg, fit.loss, fit.trials, fit.simplex_iterations, fit.evaluations, fit.simplex_converged, fit.seconds, rho);
  EXPECT_NEAR(fit.fitted.C10_A, 100, 10);
  EXPECT_NEAR(fit.fitted.C12_A, 30, 3);
  EXPECT_NEAR(fit.fitted.phi12_deg, 30, 5);
  EXPECT_EQ(fit.trials, 200u);
  EXPECT_LE(fit.loss, fit.tpe_best_loss);
  // As good as the true aberrations' reconstruction (0.943 on this set: 10 nm defocus and the scan's border;
  // the ≥ 0.95 correlation is PhaseCorrelatesWithTheTruePhase's at 5 nm).
  const double rho_true = pearson(problem.evaluate({100, 30, 30}, 0).phase, a.d.truth);
  EXPECT_GE(rho, rho_true - 0.005);
  EXPECT_GE(rho, 0.93);
}

TEST(SsbFit, WrongAstigmatismConventionsLoseToTheRightOnes) {
  const AstigmaticData& a = astigmatic();
  const SsbProblem problem = a.problem(2);
  const auto run = [&](Aberrations ab) {
    const SsbResult r = problem.evaluate(ab, 0);
    return std::make_pair(pearson(r.phase, a.d.truth), r.loss);
  };
  const auto right = run({100, 30, 30});
  const auto mirrored = run({100, 30, -30});   // the azimuth measured the other way round
  const auto turned = run({100, 30, 120});     // the strong and weak axes swapped (C12's sign flipped)
  const auto none = run({100, 0, 0});
  std::printf("[ssb-fit] Pearson (loss): right %.4f (%.6f), phi12 mirrored %.4f (%.6f), C12 sign flipped %.4f (%.6f), no C12 %.4f (%.6f)\n",
              right.first, right.second, mirrored.first, mirrored.second, turned.first, turned.second, none.first, none.second);
  EXPECT_GE(right.first, 0.93);
  EXPECT_LT(mirrored.first, right.first - 0.05);
  EXPECT_LT(turned.first, right.first - 0.05);
  EXPECT_LT(right.second, mirrored.second);
  EXPECT_LT(right.second, turned.second);
  EXPECT_LT(right.second, none.second);
}

TEST(SsbFit, ByteIdenticalOnEveryRunAndThreadCount) {
  const AstigmaticData& a = astigmatic();
  SsbFitOptions o = realistic_box();
  o.tpe.trials = 40, o.tpe.seed = 7, o.simplex.max_iterations = 40;
  const SsbProblem one = a.problem(1), three = a.problem(3);
  const SsbFit f1 = ssb_fit_aberrations(one, 0, o), f3 = ssb_fit_aberrations(three, 0, o), again = ssb_fit_aberrations(three, 0, o);
  for (const SsbFit* f : {&f3, &again}) {
    EXPECT_EQ(std::memcmp(&f1.fitted, &f->fitted, sizeof(Aberrations)), 0);  // a plain struct of doubles
    EXPECT_EQ(std::memcmp(&f1.loss, &f->loss, sizeof(double)), 0);
    EXPECT_EQ(f1.evaluations, f->evaluations);
  }
  // The phase too is bit-identical across thread counts.
  EXPECT_EQ(one.evaluate(f1.fitted, 0).phase, three.evaluate(f1.fitted, 0).phase);
  // Another seed searches differently.
  o.tpe.seed = 8;
  const SsbFit other = ssb_fit_aberrations(one, 0, o);
  EXPECT_NE(std::memcmp(&f1.tpe_best, &other.tpe_best, sizeof(Aberrations)), 0);
}

TEST(SsbFit, CanonicalAberrations) {
  const SsbFitOptions o;
  const Aberrations a = ssb_canonical_aberrations({12, -3, 10}, o);  // −C12 at 10° = C12 at 100° = C12 at −80°
  EXPECT_DOUBLE_EQ(a.C10_A, 120);
  EXPECT_DOUBLE_EQ(a.C12_A, 30);
  EXPECT_DOUBLE_EQ(a.phi12_deg, -80);
  const Aberrations b = ssb_canonical_aberrations({-900, 500, 270}, o);  // clamped to the box; 270° ≡ 90°
  EXPECT_DOUBLE_EQ(b.C10_A, -4000);
  EXPECT_DOUBLE_EQ(b.C12_A, 1000);
  EXPECT_DOUBLE_EQ(b.phi12_deg, 90);
  // The same χ at canonical and raw points.
  const double lambda = electron_wavelength_A(300e3);
  EXPECT_NEAR(ssb_chi(0.3, 0.2, lambda, {120, -30, 10}), ssb_chi(0.3, 0.2, lambda, a), 1e-12);
  SsbFitOptions bad;
  bad.c12_low_nm = -1;
  EXPECT_THROW(ssb_fit_aberrations(astigmatic().problem(1), 0, bad), Error);
}
}  // namespace tmorph
