// The CPU histogram kernel for every dtype (compute_stats derives 8/16-bit histograms from the
// bit-pattern counts, so the kernel's own narrow paths are checked here directly).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cpu/histogram_kernel.h"
#include "test_support.h"

namespace tmorph {
namespace {

std::vector<uint64_t> reference_counts(DType dt, const std::vector<uint8_t>& raw, const std::vector<double>& edges) {
  const size_t bins = edges.size() - 1;
  std::vector<uint64_t> want(bins + 2, 0);
  for (double x : test::to_doubles(dt, raw)) {
    if (!std::isfinite(x)) continue;
    if (x < edges.front()) ++want[bins];
    else if (x > edges.back()) ++want[bins + 1];
    else if (x == edges.back()) ++want[bins - 1];
    else ++want[static_cast<size_t>(std::upper_bound(edges.begin(), edges.end(), x) - edges.begin()) - 1];
  }
  return want;
}

TEST(HistogramKernel, EveryDtypeSmallAndLargeUniformAndIrregularEdges) {
  const std::vector<double> uniform = [] {
    std::vector<double> e(257);
    for (int i = 0; i <= 256; ++i) e[i] = -3.0 + 6.0 * i / 256;
    return e;
  }();
  const std::vector<double> irregular = {-1e9, -2.5, -1, -0.125, 0, 1e-30, 0.5, 3, 7.25, 1e12};
  for (DType dt : kAllDTypes) {
    for (uint64_t n : {uint64_t{100}, uint64_t{200000}}) {  // fewer and more elements than 16-bit patterns
      const auto raw = test::salted_data(dt, n, 17 + n);
      for (const auto* edges : {&uniform, &irregular}) {
        std::vector<uint64_t> got(edges->size() + 1, 0);
        cpu::histogram_add(dt, raw.data(), n, edges->data(), static_cast<uint32_t>(edges->size() - 1), got.data());
        EXPECT_EQ(got, reference_counts(dt, raw, *edges)) << dtype_name(dt) << " n=" << n << " edges=" << edges->size();
      }
    }
  }
}

TEST(HistogramKernel, BitPatternCountsEveryElement) {
  for (DType dt : {DType::BF16, DType::U8}) {
    for (uint64_t n : {uint64_t{1000}, uint64_t{300000}}) {  // below and above the interleaving threshold
      const auto raw = test::salted_data(dt, n, 5);
      std::vector<uint64_t> got(size_t{1} << (8 * dtype_size(dt)), 0), want(got.size(), 0);
      cpu::bitpattern_add(dt, raw.data(), n, got.data());
      for (uint64_t i = 0; i < n; ++i)
        ++want[dtype_size(dt) == 1 ? raw[i] : (raw[2 * i] | (raw[2 * i + 1] << 8))];
      EXPECT_EQ(got, want) << dtype_name(dt) << " n=" << n;
    }
  }
}

}  // namespace
}  // namespace tmorph
