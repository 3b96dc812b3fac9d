// The fixture of the Vulkan tests: the CPU backend and the plugins of this build, the Vulkan backend
// found among them (the tests skip with the reason when it is unavailable, unless TM_REQUIRE_VULKAN=1,
// set by .ci/run, turns that into a failure), and helpers that run one kernel on a named backend.
//
// Profiles: TM_VULKAN_PARITY_PROFILE=large adds tensors of tens of millions of elements (for a real GPU).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "tensormorph/error.h"
#include "tensormorph/stats.h"
#include "test_support.h"

namespace tmorph::vulkan_test {

inline bool large_profile() {
  const char* p = std::getenv("TM_VULKAN_PARITY_PROFILE");
  return p && std::string(p) == "large";
}

inline std::vector<uint64_t> sizes() {
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

// Values whose mean is far larger than their spread: the single-pass m2 is refused, the second pass runs.
inline std::vector<uint8_t> offset_data(DType dt, uint64_t n, uint64_t seed) {
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


}  // namespace tmorph::vulkan_test
