// Shared helpers for the unit tests: runtimes, salted random data, and independent references.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <random>
#include <tuple>
#include <vector>

#include "cpu/cpu_backend.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/planner.h"
#include "tensormorph/stats.h"

namespace tmorph::test {

// A registry with the CPU backend and, when with_plugins, the test plugins of this build.
inline std::unique_ptr<BackendRegistry> make_registry(bool with_plugins) {
  auto r = std::make_unique<BackendRegistry>();
  r->register_table(cpu::cpu_backend_table(), "static");
  if (with_plugins) r->load_plugins_from(TM_TEST_PLUGIN_DIR);
  return r;
}

// A planner over the CPU backend alone (the reference), for the life of the test program.
inline const Planner& cpu_planner() {
  static const std::unique_ptr<BackendRegistry> registry = make_registry(false);
  static const CostModel costs;
  static const Planner planner(*registry, costs, Constraints{});
  return planner;
}

// Sets an environment variable for the scope of one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

// The smallest and largest finite value of raw elements of dt in lo, hi; -1 and 1 when fewer than two distinct
// finite values exist (a range histogram edges can span).
inline void finite_range(DType dt, const std::vector<uint8_t>& raw, double* lo, double* hi);

// Runs op over data on backend `name` (a strict placement through the planner, so a plugin kernel's
// self-test runs first) and writes into *out. elements: the call's element count (0: data's elements of dt).
template <class Out>
void run_kernel_on(const BackendRegistry& registry, const CostModel& costs, const std::string& name, tm_op op, DType dt,
                   const std::vector<uint8_t>& data, const void* params, uint64_t params_size, std::vector<Out>* out,
                   uint64_t elements = 0, uint32_t format = 0) {
  OpRequest r;
  r.op = op, r.dtype = dt, r.bytes = data.size(), r.format_id = format;
  r.elements = elements ? elements : data.size() / dtype_size(dt);
  Constraints c;
  c.strict_backend = name;
  const Placement p = Planner(registry, costs, c).place(r);
  tm_kernel_call_v1 call{};
  call.struct_size = sizeof call;
  call.op = op;
  call.kernel_index = p.kernel_index;
  call.device_index = p.device_index;
  call.dtype = static_cast<tm_dtype>(dt);
  call.input = data.data();
  call.element_count = r.elements;
  call.params = params;
  call.params_size = params_size;
  call.output = out->data();
  call.output_size = out->size() * sizeof(Out);
  call.threads = 2;
  tm_message msg{};
  ASSERT_EQ(p.backend_ref->table->run(&call, &msg), TM_OK) << name << ": " << msg.text;
}

// The dtypes backend b's kernels for op take.
inline std::vector<DType> kernel_dtypes(const Backend& b, tm_op op) {
  std::vector<DType> out;
  for (const auto& k : b.kernels)
    if (k.op == op)
      for (DType t : kAllDTypes)
        if (k.dtype_mask & dtype_bit(t)) out.push_back(t);
  return out;
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
// salted_data, but f32 values moved to 1000 + x / 1000: blocks whose mean is far larger than their spread,
// so the single-pass m2 is refused and the second pass runs (other dtypes unchanged).
inline std::vector<uint8_t> offset_data(DType dt, uint64_t n, uint64_t seed) {
  std::vector<uint8_t> raw = salted_data(dt, n, seed);
  if (dt != DType::F32) return raw;
  for (uint64_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, raw.data() + i * 4, 4);
    if (std::isfinite(f)) f = 1000.0f + f * 1e-3f;
    std::memcpy(raw.data() + i * 4, &f, 4);
  }
  return raw;
}

// Feeds n elements of `width` bytes at data to feed(first, count) in pieces of odd sizes (977 k mod `modulus` + 1
// for k = 1, 2, ...), so pieces end anywhere in a block, a tile or a band.
template <class Feed>
void feed_in_odd_pieces(const uint8_t* data, uint64_t n, size_t width, uint64_t modulus, Feed&& feed) {
  for (uint64_t off = 0, k = 1; off < n; ++k) {
    const uint64_t take = std::min<uint64_t>(n - off, 977 * k % modulus + 1);
    feed(data + off * width, take);
    off += take;
  }
}

// Two final moments are the same: counts, integer strings, and every float field bit for bit.
inline void expect_same_summary(const MomentsSummary& a, const MomentsSummary& b, const std::string& where) {
  const auto same_bits = [](double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; };
  EXPECT_EQ(a.count, b.count) << where;
  EXPECT_EQ(a.finite_count, b.finite_count) << where;
  EXPECT_EQ(a.nan_count, b.nan_count) << where;
  EXPECT_EQ(a.inf_count, b.inf_count) << where;
  EXPECT_EQ(a.zero_count, b.zero_count) << where;
  for (auto [x, y, name] : {std::tuple{a.min, b.min, "min"}, {a.max, b.max, "max"}, {a.abs_max, b.abs_max, "abs_max"},
                            {a.sum, b.sum, "sum"}, {a.mean, b.mean, "mean"}, {a.std, b.std, "std"}})
    EXPECT_TRUE(same_bits(x, y)) << where << " " << name << ": " << x << " vs " << y;
  EXPECT_EQ(a.int_min, b.int_min) << where;
  EXPECT_EQ(a.int_max, b.int_max) << where;
  EXPECT_EQ(a.int_sum, b.int_sum) << where;
}

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

inline void finite_range(DType dt, const std::vector<uint8_t>& raw, double* lo, double* hi) {
  *lo = INFINITY, *hi = -INFINITY;
  for (double x : to_doubles(dt, raw))
    if (std::isfinite(x)) *lo = std::min(*lo, x), *hi = std::max(*hi, x);
  if (!(*lo < *hi)) *lo = -1, *hi = 1;
}

}  // namespace tmorph::test
