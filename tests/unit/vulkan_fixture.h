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

using test::ScopedEnv;

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
    test::run_kernel_on(*registry_, costs_, name, op, dt, data, params, params_size, out);
  }

  std::vector<DType> dtypes_of(tm_op op) const { return test::kernel_dtypes(*vulkan_, op); }

  std::unique_ptr<BackendRegistry> registry_ = std::make_unique<BackendRegistry>();
  CostModel costs_;
  const Backend* vulkan_ = nullptr;
};

using test::offset_data;

}  // namespace tmorph::vulkan_test
