// Parity of every Vulkan kernel with the CPU reference, through the real plugin on the real driver
// (Mesa lavapipe in CI). Data: salted random values (NaN, ±Inf, subnormals, ±0), blocks whose mean
// dwarfs their spread (the two-pass m2), integers spanning their whole range, and sizes that are not
// multiples of the workgroup, the 65,536-element block or the chunk (chunks are shrunk to a few
// blocks through TENSORMORPH_VULKAN_CHUNK_BYTES).
//
// Profiles: TM_VULKAN_PARITY_PROFILE=large adds tensors of tens of millions of elements (for a real
// GPU). When the backend is unavailable the tests skip saying why, unless TM_REQUIRE_VULKAN=1 (set by
// .ci/run), which turns the skip into a failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "tensormorph/error.h"
#include "tensormorph/stats.h"
#include "test_support.h"

namespace tmorph {
namespace {

bool large_profile() {
  const char* p = std::getenv("TM_VULKAN_PARITY_PROFILE");
  return p && std::string(p) == "large";
}

std::vector<uint64_t> sizes() {
  std::vector<uint64_t> s = {1, 15, 16, 17, 255, 257, 65535, 65536, 65537, 3 * 65536 + 12345};
  if (large_profile()) s.insert(s.end(), {uint64_t{40} << 20, (uint64_t{40} << 20) + 77});
  return s;
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

class VulkanParity : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_->register_table(cpu::cpu_backend_table(), "static");
    registry_->load_plugins_from(TM_PLUGIN_DIR);
    vulkan_ = registry_->find("vulkan");
    const char* require = std::getenv("TM_REQUIRE_VULKAN");
    const bool required = require && std::string(require) == "1";
    std::string why = !vulkan_ ? "the plugin was not built or not found in " TM_PLUGIN_DIR
                               : vulkan_->unavailable_reason + ": " + vulkan_->unavailable_detail;
    if (vulkan_ && vulkan_->available) return;
    if (required) FAIL() << "TM_REQUIRE_VULKAN=1 but the Vulkan backend is unavailable: " << why;
    GTEST_SKIP() << "Vulkan backend unavailable (" << why << "); install mesa-vulkan-drivers";
  }

  // The placement of op on backend `name` for dtype (strict), through the planner.
  Placement place(const std::string& name, tm_op op, DType dt, uint64_t n) const {
    Constraints c;
    c.strict_backend = name;
    Planner planner(*registry_, costs_, c);
    OpRequest r;
    r.op = op, r.dtype = dt, r.elements = n, r.bytes = n * dtype_size(dt);
    return planner.place(r);
  }

  template <class Out>
  void run(const std::string& name, tm_op op, DType dt, const std::vector<uint8_t>& data, const void* params,
           uint64_t params_size, std::vector<Out>* out) const {
    const uint64_t n = data.size() / dtype_size(dt);
    const Placement p = place(name, op, dt, n);
    tm_kernel_call_v1 call{};
    call.struct_size = sizeof call;
    call.op = op;
    call.kernel_index = p.kernel_index;
    call.device_index = p.device_index;
    call.dtype = static_cast<tm_dtype>(dt);
    call.input = data.data();
    call.element_count = n;
    call.params = params;
    call.params_size = params_size;
    call.output = out->data();
    call.output_size = out->size() * sizeof(Out);
    call.threads = 2;
    tm_message msg{};
    ASSERT_EQ(p.backend_ref->table->run(&call, &msg), TM_OK) << name << ": " << msg.text;
  }

  std::vector<DType> dtypes_of(tm_op op) const {
    std::vector<DType> out;
    for (const auto& k : vulkan_->kernels)
      if (k.op == op)
        for (DType t : kAllDTypes)
          if (k.dtype_mask & dtype_bit(t)) out.push_back(t);
    return out;
  }

  std::unique_ptr<BackendRegistry> registry_ = std::make_unique<BackendRegistry>();
  CostModel costs_;
  const Backend* vulkan_ = nullptr;
};

// Two blocks' partials are equal: counts and integers exactly, floating fields bit for bit (min and
// max compare by value: the sign of a zero extreme is not part of the contract).
void expect_same_partial(const tm_moments_partial_v1& v, const tm_moments_partial_v1& c, const std::string& where) {
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

// Values whose mean is far larger than their spread: the single-pass m2 is refused, the second pass runs.
std::vector<uint8_t> offset_data(DType dt, uint64_t n, uint64_t seed) {
  std::vector<uint8_t> raw = test::salted_data(dt, n, seed);
  if (dt != DType::F32) return raw;
  for (uint64_t i = 0; i < n; ++i) {
    float f;
    std::memcpy(&f, raw.data() + i * 4, 4);
    if (std::isfinite(f)) f = 1000.0f + f * 1e-3f;
    std::memcpy(raw.data() + i * 4, &f, 4);
  }
  return raw;
}

TEST_F(VulkanParity, MomentsBitIdenticalForEveryDtypeSizeAndChunking) {
  for (const std::string chunk : {"", "262144"}) {  // default chunks, then one block of f32 per chunk
    ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", chunk);
    for (DType dt : dtypes_of(TM_OP_STATS_MOMENTS)) {
      for (uint64_t n : sizes()) {
        for (int variant = 0; variant < 2; ++variant) {
          const auto data = variant == 0 ? test::salted_data(dt, n, n * 31 + 7) : offset_data(dt, n, n * 17 + 3);
          const uint64_t blocks = (n + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
          std::vector<tm_moments_partial_v1> v(blocks), c(blocks);
          run("vulkan", TM_OP_STATS_MOMENTS, dt, data, nullptr, 0, &v);
          run("cpu", TM_OP_STATS_MOMENTS, dt, data, nullptr, 0, &c);
          for (uint64_t b = 0; b < blocks; ++b)
            expect_same_partial(v[b], c[b], std::string(dtype_name(dt)) + " n=" + std::to_string(n) + " variant " +
                                                std::to_string(variant) + " chunk '" + chunk + "' block " +
                                                std::to_string(b));
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST_F(VulkanParity, HistogramCountsEqualForUniformIrregularAndManyBins) {
  ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", "65536");
  for (DType dt : dtypes_of(TM_OP_STATS_HISTOGRAM)) {
    for (uint64_t n : {uint64_t{17}, uint64_t{65537}, uint64_t{3 * 65536 + 12345}}) {
      const auto data = test::salted_data(dt, n, n + 5);
      const auto values = test::to_doubles(dt, data);
      double lo = INFINITY, hi = -INFINITY;
      for (double x : values)
        if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
      if (!(lo < hi)) lo = -1, hi = 1;
      std::mt19937_64 rng(n);
      for (int kind = 0; kind < 3; ++kind) {
        // 256 uniform bins over the middle of the range (values fall below and above too); irregular
        // edges at data values (exact edge hits); 5000 bins (more than shared memory counts).
        const uint32_t bins = kind == 2 ? 5000 : 256;
        std::vector<double> edges(bins + 1);
        for (uint32_t i = 0; i <= bins; ++i) edges[i] = lo / 2 + (hi / 2 - lo / 2) * i / bins;
        if (kind == 1) {
          std::set<double> picked;
          for (int tries = 0; tries < 2000 && picked.size() < 200; ++tries) {
            const double x = values[rng() % values.size()];
            if (std::isfinite(x)) picked.insert(x);
          }
          edges.assign(picked.begin(), picked.end());
          if (edges.size() < 2) edges = {lo, hi};
        }
        const tm_histogram_params_v1 params{static_cast<uint32_t>(edges.size() - 1), edges.data()};
        std::vector<uint64_t> v(edges.size() + 1, 0), c(edges.size() + 1, 0);
        run("vulkan", TM_OP_STATS_HISTOGRAM, dt, data, &params, sizeof params, &v);
        run("cpu", TM_OP_STATS_HISTOGRAM, dt, data, &params, sizeof params, &c);
        EXPECT_EQ(v, c) << dtype_name(dt) << " n=" << n << " edges kind " << kind;
        if (HasFailure()) return;
      }
    }
  }
}

TEST_F(VulkanParity, BitPatternCountsEqual) {
  ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", "65536");
  for (DType dt : dtypes_of(TM_OP_STATS_BITPATTERN_HISTOGRAM)) {
    for (uint64_t n : sizes()) {
      const auto data = test::salted_data(dt, n, n * 3 + 1);
      std::vector<uint64_t> v(size_t{1} << (8 * dtype_size(dt)), 0), c(v.size(), 0);
      run("vulkan", TM_OP_STATS_BITPATTERN_HISTOGRAM, dt, data, nullptr, 0, &v);
      run("cpu", TM_OP_STATS_BITPATTERN_HISTOGRAM, dt, data, nullptr, 0, &c);
      EXPECT_EQ(v, c) << dtype_name(dt) << " n=" << n;
    }
  }
}

TEST_F(VulkanParity, QuantilesEqualTheCpuSelection) {
  const std::vector<double> probabilities = {0, 1e-6, 0.001, 0.01, 0.25, 0.5, 0.75, 0.99, 0.999, 1 - 1e-6, 1};
  for (const std::string chunk : {"", "65536"}) {
    ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", chunk);
    for (DType dt : dtypes_of(TM_OP_STATS_QUANTILES)) {
      for (uint64_t n : sizes()) {
        for (int variant = 0; variant < 2; ++variant) {
          auto data = variant == 0 ? test::salted_data(dt, n, n * 11 + 2) : offset_data(dt, n, n * 13 + 9);
          if (variant == 1 && dt != DType::F32)  // many ties: a few distinct values
            for (size_t i = 0; i < data.size(); ++i) data[i] = (i % 4 == 0) ? static_cast<uint8_t>(i / 4 % 3) : 0;
          const tm_quantiles_params_v1 params{static_cast<uint32_t>(probabilities.size()), probabilities.data(), 0};
          std::vector<tm_quantile_value_v1> v(probabilities.size()), c(probabilities.size());
          run("vulkan", TM_OP_STATS_QUANTILES, dt, data, &params, sizeof params, &v);
          run("cpu", TM_OP_STATS_QUANTILES, dt, data, &params, sizeof params, &c);
          for (size_t q = 0; q < probabilities.size(); ++q) {
            const std::string where = std::string(dtype_name(dt)) + " n=" + std::to_string(n) + " p=" +
                                      std::to_string(probabilities[q]) + " chunk '" + chunk + "'";
            if (std::isnan(c[q].value)) EXPECT_TRUE(std::isnan(v[q].value)) << where;
            else EXPECT_EQ(v[q].value, c[q].value) << where;
            EXPECT_EQ(v[q].lo, v[q].value) << where;
            EXPECT_EQ(v[q].hi, v[q].value) << where;
            EXPECT_EQ(v[q].sample_size, c[q].sample_size) << where;
          }
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST_F(VulkanParity, AllNonFiniteInputHasNoQuantilesAndEmptyMoments) {
  std::vector<uint8_t> data(1000 * 4);
  for (size_t i = 0; i < 1000; ++i) {
    const uint32_t bits = i % 2 ? 0x7FC00000u : 0xFF800000u;  // NaN, -Inf
    std::memcpy(data.data() + i * 4, &bits, 4);
  }
  const std::vector<double> p = {0.5};
  const tm_quantiles_params_v1 params{1, p.data(), 0};
  std::vector<tm_quantile_value_v1> q(1);
  run("vulkan", TM_OP_STATS_QUANTILES, DType::F32, data, &params, sizeof params, &q);
  EXPECT_TRUE(std::isnan(q[0].value));
  EXPECT_EQ(q[0].sample_size, 0u);
  std::vector<tm_moments_partial_v1> v(1), c(1);
  run("vulkan", TM_OP_STATS_MOMENTS, DType::F32, data, nullptr, 0, &v);
  run("cpu", TM_OP_STATS_MOMENTS, DType::F32, data, nullptr, 0, &c);
  expect_same_partial(v[0], c[0], "all non-finite");
}

// The whole statistics pipeline pinned to Vulkan equals the one pinned to the CPU, and its placement
// report names the Vulkan device for every op.
TEST_F(VulkanParity, StatsPinnedToVulkanEqualTheCpuAndNameTheDevice) {
  for (DType dt : {DType::F32, DType::BF16, DType::I16, DType::U8}) {
    const uint64_t n = 200003;
    const auto data = test::salted_data(dt, n, 99);
    Constraints on_vulkan, on_cpu;
    on_vulkan.strict_backend = "vulkan", on_cpu.strict_backend = "cpu";
    StatsOptions options;
    const StatsResult v = compute_stats(data.data(), dt, n, Planner(*registry_, costs_, on_vulkan), options);
    const StatsResult c = compute_stats(data.data(), dt, n, Planner(*registry_, costs_, on_cpu), options);
    EXPECT_EQ(v.moments.count, c.moments.count);
    EXPECT_EQ(v.moments.nan_count, c.moments.nan_count);
    EXPECT_EQ(v.moments.min, c.moments.min);
    EXPECT_EQ(v.moments.max, c.moments.max);
    EXPECT_EQ(v.moments.sum, c.moments.sum) << dtype_name(dt);
    EXPECT_EQ(v.moments.mean, c.moments.mean) << dtype_name(dt);
    EXPECT_EQ(v.moments.std, c.moments.std) << dtype_name(dt);
    EXPECT_EQ(v.moments.int_sum, c.moments.int_sum);
    ASSERT_TRUE(v.histogram && c.histogram);
    EXPECT_EQ(v.histogram->counts, c.histogram->counts) << dtype_name(dt);
    ASSERT_EQ(v.quantiles.size(), c.quantiles.size());
    for (size_t q = 0; q < v.quantiles.size(); ++q) EXPECT_EQ(v.quantiles[q].value, c.quantiles[q].value);
    for (const auto& p : v.placement) {
      EXPECT_EQ(p.backend, "vulkan") << p.op;
      EXPECT_EQ(p.device, vulkan_->devices.at(0).name) << p.op;
    }
  }
}

// A dtype without a Vulkan kernel is refused by a strict request with the reason, and placed on the
// CPU, with the reason reported, when Vulkan is only preferred.
TEST_F(VulkanParity, MissingKernelRefusedWhenStrictAndFallsBackWhenPreferred) {
  try {
    place("vulkan", TM_OP_STATS_MOMENTS, DType::F64, 1000);
    ADD_FAILURE() << "f64 moments should have no Vulkan kernel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dtype_unsupported"), std::string::npos) << e.what();
  }
  Constraints prefer;
  prefer.prefer = {"vulkan"};
  OpRequest r;
  r.op = TM_OP_STATS_MOMENTS, r.dtype = DType::F64, r.elements = 1000, r.bytes = 8000;
  const Placement p = Planner(*registry_, costs_, prefer).place(r);
  EXPECT_EQ(p.backend, "cpu");
  EXPECT_EQ(p.reason, "fallback_missing_kernel");
}

}  // namespace
}  // namespace tmorph

namespace tmorph {
namespace {

// Calls that read a resident copy (the residency extension) give what calls over host data give,
// from any canonical block on, with the copy split into several device chunks.
TEST_F(VulkanParity, ResidentCopyServesEveryKernelLikeHostData) {
  ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", "262144");  // 64 Ki f32 per device chunk
  ASSERT_TRUE(vulkan_->can_upload);
  const uint64_t n = 5 * 65536 + 999;
  const auto data = test::salted_data(DType::F32, n, 4242);
  uint64_t handle = 0;
  tm_message msg{};
  ASSERT_EQ(vulkan_->table->upload(0, data.data(), data.size(), &handle, &msg), TM_OK) << msg.text;
  auto call_for = [&](tm_op op, uint64_t first, const void* params, uint64_t params_size, void* out, uint64_t out_size,
                      uint64_t buffer) {
    const Placement p = place("vulkan", op, DType::F32, n);
    tm_kernel_call_v1 call{};
    call.struct_size = sizeof call;
    call.op = op;
    call.kernel_index = p.kernel_index;
    call.dtype = TM_DTYPE_F32;
    call.input = data.data() + first * 4;
    call.element_count = n - first;
    call.params = params;
    call.params_size = params_size;
    call.output = out;
    call.output_size = out_size;
    call.threads = 1;
    call.input_buffer = buffer;
    call.input_offset = first * 4;
    EXPECT_EQ(vulkan_->table->run(&call, &msg), TM_OK) << msg.text;
  };
  for (uint64_t first : {uint64_t{0}, uint64_t{2 * 65536}}) {
    const uint64_t blocks = (n - first + 65535) / 65536;
    std::vector<tm_moments_partial_v1> a(blocks), b(blocks);
    call_for(TM_OP_STATS_MOMENTS, first, nullptr, 0, a.data(), blocks * sizeof a[0], 0);
    call_for(TM_OP_STATS_MOMENTS, first, nullptr, 0, b.data(), blocks * sizeof b[0], handle);
    for (uint64_t k = 0; k < blocks; ++k) expect_same_partial(b[k], a[k], "resident block " + std::to_string(k));
    std::vector<double> edges = {-3, -1, -0.5, 0, 0.25, 1, 2.5};
    const tm_histogram_params_v1 hp{6, edges.data()};
    std::vector<uint64_t> ha(8, 0), hb(8, 0);
    call_for(TM_OP_STATS_HISTOGRAM, first, &hp, sizeof hp, ha.data(), ha.size() * 8, 0);
    call_for(TM_OP_STATS_HISTOGRAM, first, &hp, sizeof hp, hb.data(), hb.size() * 8, handle);
    EXPECT_EQ(ha, hb);
    const std::vector<double> probabilities = {0.001, 0.5, 0.999};
    const tm_quantiles_params_v1 qp{3, probabilities.data(), 0};
    std::vector<tm_quantile_value_v1> qa(3), qb(3);
    call_for(TM_OP_STATS_QUANTILES, first, &qp, sizeof qp, qa.data(), sizeof(tm_quantile_value_v1) * 3, 0);
    call_for(TM_OP_STATS_QUANTILES, first, &qp, sizeof qp, qb.data(), sizeof(tm_quantile_value_v1) * 3, handle);
    for (int q = 0; q < 3; ++q) EXPECT_EQ(qa[q].value, qb[q].value);
  }
  // A call that reads past the copy, or from an offset that is not block-aligned, is refused.
  tm_kernel_call_v1 bad{};
  bad.struct_size = sizeof bad;
  bad.op = TM_OP_STATS_HISTOGRAM;
  bad.kernel_index = place("vulkan", TM_OP_STATS_HISTOGRAM, DType::F32, n).kernel_index;
  bad.dtype = TM_DTYPE_F32;
  bad.input = data.data();
  bad.element_count = n + 1;
  bad.input_buffer = handle;
  EXPECT_EQ(vulkan_->table->run(&bad, &msg), TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg.text).find("outside its resident copy"), std::string::npos) << msg.text;
  bad.element_count = 10, bad.input_offset = 4;
  EXPECT_EQ(vulkan_->table->run(&bad, &msg), TM_ERR_INVALID_ARGUMENT);
  bad.input_offset = 0, bad.input_buffer = handle + 1000;
  EXPECT_EQ(vulkan_->table->run(&bad, &msg), TM_ERR_INVALID_ARGUMENT);
  vulkan_->table->release(handle);
}

// The statistics pipeline moves a tensor to the device once: the first op placed there reports the
// transfer, the ops after it read the device copy and report none.
TEST_F(VulkanParity, StatsMoveTheTensorToTheDeviceOnce) {
  const uint64_t n = 300001;
  const auto data = test::salted_data(DType::F32, n, 7);
  Constraints on_vulkan;
  on_vulkan.strict_backend = "vulkan";
  const StatsResult r = compute_stats(data.data(), DType::F32, n, Planner(*registry_, costs_, on_vulkan), StatsOptions{});
  ASSERT_EQ(r.placement.size(), 3u);
  EXPECT_EQ(r.placement[0].op, "stats.moments");
  EXPECT_EQ(r.placement[0].bytes_transferred, n * 4);
  EXPECT_EQ(r.placement[1].bytes_transferred, 0u) << r.placement[1].op;
  EXPECT_EQ(r.placement[2].bytes_transferred, 0u) << r.placement[2].op;
}

}  // namespace
}  // namespace tmorph

namespace tmorph {
namespace {

// Q4_0 and Q8_0 decode on Vulkan to the CPU's (ggml's) floats bit for bit, scales of every class
// included (subnormal, zero, ±Inf, NaN halves), across launch chunks.
TEST_F(VulkanParity, DequantizeQ4_0AndQ8_0BitIdentical) {
  ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", "4096");  // 32 blocks of output per launch
  std::mt19937_64 rng(77);
  const uint16_t special_scales[] = {0x0001, 0x03FF, 0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x3C00, 0xBC00};
  for (uint32_t type : {2u, 8u}) {
    const size_t block_bytes = type == 8 ? 34 : 18;
    for (uint64_t blocks : {uint64_t{1}, uint64_t{33}, uint64_t{1000}}) {
      std::vector<uint8_t> data(blocks * block_bytes);
      for (auto& b : data) b = static_cast<uint8_t>(rng());
      for (uint64_t k = 0; k < blocks; ++k) {
        uint16_t d = static_cast<uint16_t>(rng());
        if (k % 3 == 0) d = special_scales[(k / 3) % 9];
        std::memcpy(&data[k * block_bytes], &d, 2);
      }
      const tm_dequantize_ggml_params_v1 params{type, 0};
      std::vector<float> v(blocks * 32), c(blocks * 32);
      for (const std::string backend : {"vulkan", "cpu"}) {
        Constraints pin;
        pin.strict_backend = backend;
        OpRequest r;
        r.op = TM_OP_DEQUANTIZE_GGML, r.dtype = DType::F32, r.elements = blocks * 32, r.bytes = data.size();
        r.format_id = type, r.format_name = type == 8 ? "Q8_0" : "Q4_0";
        const Placement p = Planner(*registry_, costs_, pin).place(r);
        tm_kernel_call_v1 call{};
        call.struct_size = sizeof call;
        call.op = TM_OP_DEQUANTIZE_GGML;
        call.kernel_index = p.kernel_index;
        call.dtype = TM_DTYPE_F32;
        call.input = data.data();
        call.element_count = blocks * 32;
        call.params = &params;
        call.params_size = sizeof params;
        auto& out = backend == "vulkan" ? v : c;
        call.output = out.data();
        call.output_size = out.size() * sizeof(float);
        call.threads = 1;
        tm_message msg{};
        ASSERT_EQ(p.backend_ref->table->run(&call, &msg), TM_OK) << backend << ": " << msg.text;
      }
      for (size_t i = 0; i < v.size(); ++i) {
        if (std::isnan(c[i])) {  // NaN payloads are not part of the contract
          EXPECT_TRUE(std::isnan(v[i])) << "type " << type << " value " << i;
          continue;
        }
        uint32_t a, b;
        std::memcpy(&a, &v[i], 4), std::memcpy(&b, &c[i], 4);
        ASSERT_EQ(a, b) << "type " << type << " value " << i << ": " << v[i] << " vs " << c[i];
      }
    }
  }
}

}  // namespace
}  // namespace tmorph

namespace tmorph {
namespace {

// Several host threads calling the plugin at once (as the indexer's workers do) get their own results.
TEST_F(VulkanParity, ConcurrentCallsGetTheirOwnResults) {
  std::vector<std::vector<uint8_t>> inputs;
  // Different sizes, so that the plugin's reusable buffers grow while other calls are in flight.
  const int kThreads = 4;
  std::vector<uint64_t> blocks;
  for (int t = 0; t < kThreads; ++t) {
    blocks.push_back(1 + 4 * t);
    inputs.push_back(test::salted_data(DType::F32, (blocks[t] - 1) * 65536 + 17, 100 + t));
  }
  std::vector<std::vector<tm_moments_partial_v1>> on_vulkan(kThreads), on_cpu(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    on_vulkan[t].resize(blocks[t]), on_cpu[t].resize(blocks[t]);
    run("cpu", TM_OP_STATS_MOMENTS, DType::F32, inputs[t], nullptr, 0, &on_cpu[t]);
  }
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 10; ++repeat) {
        std::fill(on_vulkan[t].begin(), on_vulkan[t].end(), tm_moments_partial_v1{});
        run("vulkan", TM_OP_STATS_MOMENTS, DType::F32, inputs[t], nullptr, 0, &on_vulkan[t]);
        for (uint64_t b = 0; b < blocks[t]; ++b)
          expect_same_partial(on_vulkan[t][b], on_cpu[t][b], "thread " + std::to_string(t) + " block " + std::to_string(b));
      }
    });
  for (auto& th : threads) th.join();
}

}  // namespace
}  // namespace tmorph
