// stem.ssb_overlap on the GPU backends (cuFFT on CUDA; FFTW standing in under the host grid emulation in CI;
// HIP has no FFT here): both variants against the CPU reference on random spectra, within the op's bound.
// Instantiated for gpuemu, cuda and hip with the rest of the GpuParity suite (gpu_parity_test.cpp).
#include "gpu_fixture.h"

#include <complex>
#include <random>

namespace tmorph::gpu_test {
namespace {

TEST_P(GpuParity, SsbOverlapWithinTheBoundOfTheCpu) {
  if (std::none_of(backend_->kernels.begin(), backend_->kernels.end(), [](const auto& k) { return k.op == TM_OP_STEM_SSB_OVERLAP; }))
    GTEST_SKIP() << GetParam() << " has no SSB kernel (no FFT library for it here)";
  constexpr uint64_t R = 12, C = 10, N = R * C, stride = R * (C / 2 + 1) + 3, B = 37;
  std::mt19937_64 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  std::vector<float> g(2 * B * stride);
  for (auto& v : g) v = normal(rng);
  std::vector<double> k(2 * B), dc(B), nu(2 * N), e(2 * N), rowf(2 * B * R), colf(2 * B * C);
  for (uint64_t b = 0; b < B; ++b) k[2 * b] = uni(rng) * 0.8, k[2 * b + 1] = uni(rng) * 0.8, dc[b] = 50 + 10 * uni(rng);
  for (uint64_t q = 0; q < N; ++q) {
    nu[2 * q] = (static_cast<double>(q / C) - R / 2.0) / R * 1.2, nu[2 * q + 1] = (static_cast<double>(q % C) - C / 2.0) / C * 1.2;
    const double angle = 3 * uni(rng);
    e[2 * q] = std::cos(angle), e[2 * q + 1] = std::sin(angle);
  }
  for (uint64_t i = 0; i < B * R; ++i) rowf[2 * i] = std::cos(i * 0.37), rowf[2 * i + 1] = std::sin(i * 0.37);
  for (uint64_t i = 0; i < B * C; ++i) colf[2 * i] = std::cos(i * 0.21), colf[2 * i + 1] = std::sin(i * 0.21);
  const tm_ssb_chi_term_v1 terms[] = {{3.0, 2, 0, 0}, {1.5, 2, 2, 0.3}, {0.8, 4, 0, 0}, {0.4, 3, 3, -0.2}};
  const std::vector<uint8_t> input(reinterpret_cast<const uint8_t*>(g.data()), reinterpret_cast<const uint8_t*>(g.data() + g.size()));
  for (uint32_t variant : {TM_SSB_QUADRATIC, TM_SSB_DIRECT}) {
    const bool quadratic = variant == TM_SSB_QUADRATIC;
    const tm_stem_ssb_params_v1 p{variant, quadratic ? 0u : 4u, R, C, B, stride, 1.0, k.data(), dc.data(), nu.data(),
                                  quadratic ? e.data() : nullptr, quadratic ? rowf.data() : nullptr, quadratic ? colf.data() : nullptr,
                                  quadratic ? nullptr : terms, nullptr, 0};
    std::vector<double> got(4 * N), want(4 * N);
    test::run_kernel_on(*registry_, costs_, GetParam(), TM_OP_STEM_SSB_OVERLAP, DType::F32, input, &p, sizeof p, &got, g.size(), variant);
    test::run_kernel_on(*registry_, costs_, "cpu", TM_OP_STEM_SSB_OVERLAP, DType::F32, input, &p, sizeof p, &want, g.size(), variant);
    double scale = 0;
    for (uint64_t q = 0; q < N; ++q) scale = std::max({scale, std::fabs(want[4 * q]), std::fabs(want[4 * q + 1])});
    ASSERT_GT(scale, 0);
    uint64_t arg_outliers = 0;
    for (uint64_t q = 0; q < N; ++q) {
      EXPECT_NEAR(got[4 * q], want[4 * q], 1e-5 * scale) << "Re, variant " << variant << " q " << q;
      EXPECT_NEAR(got[4 * q + 1], want[4 * q + 1], 1e-5 * scale) << "Im, variant " << variant << " q " << q;
      // Σ arg: an O_b on the negative real axis may land on either side of the branch cut (±π).
      const double d = got[4 * q + 2] - want[4 * q + 2], wrapped = d - 2 * M_PI * std::round(d / (2 * M_PI));
      arg_outliers += std::fabs(wrapped) > 1e-3;
    }
    EXPECT_LE(arg_outliers, N / 100) << "variant " << variant << ": sums of arguments off by more than 1e-3 rad";
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace tmorph::gpu_test
