// The two exact quantile kernels (radix refinement for large inputs, selection for small ones) agree
// bit for bit, on every 32/64-bit dtype, for any thread count.
#include <gtest/gtest.h>

#include <cstring>

#include "cpu/quantile_kernels.h"
#include "cpu/radix_select.h"
#include "test_support.h"

namespace tmorph {
namespace {

TEST(QuantileKernels, RadixEqualsSelectionOnEveryWideDtype) {
  const double probabilities[] = {0.0, 0.001, 0.01, 0.25, 0.5, 0.75, 0.99, 0.999, 1.0, 0.3333333};
  const tm_quantiles_params_v1 params{10, probabilities, 0};
  for (DType dt : {DType::F32, DType::F64, DType::I32, DType::U32, DType::I64, DType::U64}) {
    for (uint64_t n : {uint64_t{1}, uint64_t{2}, uint64_t{1000}, uint64_t{300007}}) {
      const auto raw = test::salted_data(dt, n, 40 + n);
      tm_quantile_value_v1 want[10], got[10];
      cpu::quantiles_by_selection(dt, raw.data(), n, 1, params, want);
      for (unsigned threads : {1u, 3u}) {
        cpu::quantiles_radix(dt, raw.data(), n, params, got, threads);
        for (int q = 0; q < 10; ++q) {
          const bool same = std::memcmp(&got[q].value, &want[q].value, sizeof(double)) == 0 ||
                            (std::isnan(got[q].value) && std::isnan(want[q].value));
          EXPECT_TRUE(same) << dtype_name(dt) << " n=" << n << " p=" << probabilities[q] << ": " << got[q].value
                            << " vs " << want[q].value;
          EXPECT_EQ(got[q].sample_size, want[q].sample_size);
        }
      }
    }
  }
}

TEST(QuantileKernels, AllValuesEqualAndAllNonFinite) {
  const double probabilities[] = {0.0, 0.5, 1.0};
  const tm_quantiles_params_v1 params{3, probabilities, 0};
  std::vector<float> same(5000, -0.75f);
  tm_quantile_value_v1 out[3];
  cpu::quantiles_radix(DType::F32, same.data(), same.size(), params, out, 2);
  for (const auto& q : out) EXPECT_EQ(q.value, -0.75);
  std::vector<float> bad = {NAN, INFINITY, -INFINITY};
  cpu::quantiles_radix(DType::F32, bad.data(), bad.size(), params, out, 1);
  for (const auto& q : out) {
    EXPECT_TRUE(std::isnan(q.value));
    EXPECT_EQ(q.sample_size, 0u);
  }
}

}  // namespace
}  // namespace tmorph
