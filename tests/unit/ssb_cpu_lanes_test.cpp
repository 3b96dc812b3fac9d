// The CPU SSB kernel's two vectorised steps (backends/cpu/ssb_quadratic_plane.h, ssb_phase_sums.h) against their
// scalar references, bit for bit: random planes of odd and even sizes (runs of columns that end in a scalar tail
// on every SIMD target), pixels whose k ∓ ν disks cover none, one or both of each frequency, and phases in every
// quadrant including signed zeros.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <tuple>
#include <utility>
#include <random>
#include <vector>

#include "cpu/ssb_phase_sums.h"
#include "cpu/ssb_quadratic_plane.h"
#include "support/fast_atan2.h"

namespace tmorph {
namespace {

using cpu::QuadraticPlane;

struct PlaneInputs {
  std::vector<float> g_half;
  std::vector<double> nu, e_chi, row_factor, col_factor;
};

PlaneInputs random_inputs(uint64_t rows, uint64_t cols, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> angle(-M_PI, M_PI);
  PlaneInputs in;
  for (uint64_t k = 0; k < 2 * rows * (cols / 2 + 1); ++k) in.g_half.push_back(static_cast<float>(normal(rng)));
  for (uint64_t i = 0; i < rows; ++i)
    for (uint64_t j = 0; j < cols; ++j) {
      const double fi = (i < (rows + 1) / 2 ? double(i) : double(i) - double(rows)) / double(rows);
      const double fj = (j < (cols + 1) / 2 ? double(j) : double(j) - double(cols)) / double(cols);
      in.nu.push_back(fi), in.nu.push_back(fj);
      const double chi = angle(rng);
      in.e_chi.push_back(std::cos(chi)), in.e_chi.push_back(std::sin(chi));
    }
  // e_chi with sin χ = 0 and a tiny one: the "both" weight's max(2|sin χ|, 1e-8) and its sign of zero.
  const double sines[] = {0.0, -0.0, 1e-12};
  for (size_t k = 0; k < std::size(sines) && 2 * k + 1 < in.e_chi.size(); ++k) in.e_chi[2 * k + 1] = sines[k];
  for (uint64_t i = 0; i < rows; ++i) in.row_factor.push_back(std::cos(angle(rng))), in.row_factor.push_back(std::sin(angle(rng)));
  for (uint64_t j = 0; j < cols; ++j) in.col_factor.push_back(std::cos(angle(rng))), in.col_factor.push_back(std::sin(angle(rng)));
  return in;
}

TEST(SsbCpuLanes, QuadraticPlaneEqualsTheScalarReferenceBitForBit) {
  std::mt19937_64 rng(7);
  for (const auto& [rows, cols] : {std::pair<uint64_t, uint64_t>{1, 1}, {3, 5}, {8, 8}, {9, 17}, {16, 31}, {24, 48}, {13, 64}}) {
    const PlaneInputs in = random_inputs(rows, cols, rng);
    // k_b near the centre (the disks overlap: both), off-centre (one of them) and outside the frequencies (none).
    for (const auto& [kr, kc, kmax] : {std::tuple{0.05, -0.03, 0.3}, std::tuple{0.3, 0.2, 0.25}, std::tuple{2.0, 2.0, 0.1}}) {
      QuadraticPlane a;
      a.rows = rows, a.cols = cols, a.g_half = in.g_half.data(), a.nu = in.nu.data(), a.e_chi = in.e_chi.data();
      a.row_factor = in.row_factor.data(), a.col_factor = in.col_factor.data(), a.kr = kr, a.kc = kc, a.kmax2 = kmax * kmax;
      std::vector<float> vector_plane(2 * rows * cols, 99.0f), scalar_plane(2 * rows * cols);
      cpu::fill_quadratic_plane(a, vector_plane.data());
      for (uint64_t i = 0; i < rows; ++i)
        for (uint64_t j = 0; j < cols; ++j) cpu::quadratic_value(a, i, j, scalar_plane.data() + 2 * (i * cols + j));
      EXPECT_EQ(std::memcmp(vector_plane.data(), scalar_plane.data(), vector_plane.size() * sizeof(float)), 0)
          << rows << " x " << cols << ", k = (" << kr << ", " << kc << ")";
    }
  }
}

TEST(SsbCpuLanes, PhaseSumsEqualTheScalarLoopBitForBit) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal;
  for (const uint64_t n : {1u, 7u, 8u, 9u, 63u, 1000u}) {
    std::vector<float> o(2 * n);
    for (float& v : o) v = normal(rng);
    const float specials[][2] = {{0.0f, 0.0f}, {-0.0f, 0.0f}, {0.0f, -0.0f}, {-0.0f, -0.0f}, {-1.0f, 0.0f},
                                 {-1.0f, -0.0f}, {1.0f, 1.0f}, {-2.0f, 2.0f}, {3.0f, -3.0f}};
    for (uint64_t k = 0; k < n && k < std::size(specials); ++k) o[2 * k] = specials[k][0], o[2 * k + 1] = specials[k][1];
    std::vector<double> vector_sums(4 * n), scalar_sums(4 * n);
    for (uint64_t k = 0; k < 4 * n; ++k) vector_sums[k] = scalar_sums[k] = 0.25 * double(k % 5);
    const double inv_n = 1.0 / 37.0;
    cpu::add_phase_sums(o.data(), n, inv_n, vector_sums.data());
    for (uint64_t q = 0; q < n; ++q) {
      const double re = o[2 * q] * inv_n, im = o[2 * q + 1] * inv_n, a = fast_atan2(im, re);
      double* s = scalar_sums.data() + 4 * q;
      s[0] += re, s[1] += im, s[2] += a, s[3] += a * a;
    }
    EXPECT_EQ(std::memcmp(vector_sums.data(), scalar_sums.data(), vector_sums.size() * sizeof(double)), 0) << n << " values";
  }
}

}  // namespace
}  // namespace tmorph
