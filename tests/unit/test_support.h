// Shared helpers for the unit tests: runtimes, salted random data, and independent references.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <random>
#include <vector>

#include "cpu/cpu_backend.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/planner.h"

namespace tmorph::test {

// A registry with the CPU backend and, when with_plugins, the test plugins of this build.
inline std::unique_ptr<BackendRegistry> make_registry(bool with_plugins) {
  auto r = std::make_unique<BackendRegistry>();
  r->register_table(cpu::cpu_backend_table(), "static");
  if (with_plugins) r->load_plugins_from(TM_TEST_PLUGIN_DIR);
  return r;
}

// Raw little-endian bytes of `n` random elements of dtype. Floats are salted with NaN, ±Inf,
// subnormals and ±0 (about 1% each); integers span the full range including both extremes.
inline std::vector<uint8_t> salted_data(DType dtype, uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t w = dtype_size(dtype);
  std::vector<uint8_t> out(n * w);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (uint64_t i = 0; i < n; ++i) {
    uint8_t* p = out.data() + i * w;
    if (!dtype_is_float(dtype)) {
      uint64_t bits = rng();
      const double r = u01(rng);
      if (r < 0.01) bits = 0;
      else if (r < 0.02) bits = ~uint64_t{0};  // all ones: -1 or the max
      else if (r < 0.03 && dtype_is_signed_int(dtype)) bits = uint64_t{1} << (8 * w - 1);  // min
      if (dtype == DType::BOOL) bits = (bits & 3) == 0 ? 0 : (bits & 0xFF);  // also non-0/1 true bytes
      std::memcpy(p, &bits, w);
      continue;
    }
    const double r = u01(rng);
    double v = normal(rng) * std::exp2(static_cast<int>(rng() % 16) - 8);
    if (r < 0.01) v = std::numeric_limits<double>::quiet_NaN();
    else if (r < 0.02) v = (rng() & 1) ? INFINITY : -INFINITY;
    else if (r < 0.03) v = (rng() & 1) ? 0.0 : -0.0;
    if (dtype == DType::F64) {
      if (r >= 0.03 && r < 0.04) v = std::ldexp(static_cast<double>(rng() % 1000), -1074);  // subnormal
      std::memcpy(p, &v, 8);
    } else if (dtype == DType::F32) {
      float f = static_cast<float>(v);
      if (r >= 0.03 && r < 0.04) f = std::ldexp(static_cast<float>(rng() % 1000), -149);
      std::memcpy(p, &f, 4);
    } else {
      // Narrow floats: random bit patterns cover every class, subnormals and specials included.
      const uint64_t bits = rng();
      std::memcpy(p, &bits, w);
    }
  }
  return out;
}

// Two blocks' partials are equal: counts and integers exactly, floating fields bit for bit (min and
// max compare by value: the sign of a zero extreme is not part of the contract).
inline void expect_same_partial(const tm_moments_partial_v1& v, const tm_moments_partial_v1& c, const std::string& where) {
  EXPECT_EQ(v.count, c.count) << where;
  EXPECT_EQ(v.finite_count, c.finite_count) << where;
  EXPECT_EQ(v.nan_count, c.nan_count) << where;
  EXPECT_EQ(v.inf_count, c.inf_count) << where;
  EXPECT_EQ(v.zero_count, c.zero_count) << where;
  EXPECT_EQ(v.min, c.min) << where;
  EXPECT_EQ(v.max, c.max) << where;
  EXPECT_EQ(v.abs_max, c.abs_max) << where;
  auto bits = [](double d) { uint64_t b; std::memcpy(&b, &d, 8); return b; };
  EXPECT_EQ(bits(v.sum), bits(c.sum)) << where << " sum " << v.sum << " vs " << c.sum;
  EXPECT_EQ(bits(v.sum_err), bits(c.sum_err)) << where;
  EXPECT_EQ(bits(v.mean), bits(c.mean)) << where << " mean " << v.mean << " vs " << c.mean;
  EXPECT_EQ(bits(v.m2), bits(c.m2)) << where << " m2 " << v.m2 << " vs " << c.m2;
  EXPECT_EQ(v.int_min, c.int_min) << where;
  EXPECT_EQ(v.int_max, c.int_max) << where;
  EXPECT_EQ(v.uint_min, c.uint_min) << where;
  EXPECT_EQ(v.uint_max, c.uint_max) << where;
  EXPECT_EQ(v.int_sum_lo, c.int_sum_lo) << where;
  EXPECT_EQ(v.int_sum_hi, c.int_sum_hi) << where;
}

inline std::vector<double> to_doubles(DType dtype, const std::vector<uint8_t>& raw) {
  const size_t w = dtype_size(dtype);
  std::vector<double> v(raw.size() / w);
  for (size_t i = 0; i < v.size(); ++i) v[i] = element_to_double(dtype, raw.data() + i * w);
  return v;
}

}  // namespace tmorph::test
