// The fixture of the GPU backends' parity tests, run for each GPU backend name: gpuemu (the CUDA/HIP
// kernel source under the host grid emulation, always present in a test build: its tests are what CI
// runs), cuda and hip (real devices: skipped with the reason when unavailable, unless
// TM_REQUIRE_<NAME>=1, which scripts/device-check sets on a GPU machine).
#pragma once

#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <string>

#include "test_support.h"
#include "tensormorph/error.h"

namespace tmorph::gpu_test {

class GpuParity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    registry_->register_table(cpu::cpu_backend_table(), "static");
    registry_->load_plugins_from(TM_PLUGIN_DIR);
    registry_->load_plugins_from(TM_GPUEMU_PLUGIN_DIR);
    backend_ = registry_->find(GetParam());
    std::string upper = GetParam();
    for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    const char* require = std::getenv(("TM_REQUIRE_" + upper).c_str());
    const bool required = GetParam() == "gpuemu" || (require && std::string(require) == "1");
    const std::string why = !backend_ ? "the plugin was not built or not found"
                                      : backend_->unavailable_reason + ": " + backend_->unavailable_detail;
    if (backend_ && backend_->available) return;
    if (required) FAIL() << GetParam() << " is required here but unavailable: " << why;
    GTEST_SKIP() << GetParam() << " backend unavailable (" << why << ")";
  }

  // Runs op on backend `name` (strict placement; the kernel's self-test runs first) over data.
  template <class Out>
  void run(const std::string& name, tm_op op, DType dt, const std::vector<uint8_t>& data, const void* params,
           uint64_t params_size, std::vector<Out>* out, uint32_t format = 0) const {
    OpRequest r;
    r.op = op, r.dtype = dt, r.bytes = data.size();
    r.elements = tm_op_takes_format(op) ? out->size() * sizeof(Out) / 4 : data.size() / dtype_size(dt);
    r.format_id = format;
    Constraints c;
    c.strict_backend = name;
    const Placement p = Planner(*registry_, costs_, c).place(r);
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

  std::vector<DType> dtypes_of(tm_op op) const {
    std::vector<DType> out;
    for (const auto& k : backend_->kernels)
      if (k.op == op)
        for (DType t : kAllDTypes)
          if (k.dtype_mask & dtype_bit(t)) out.push_back(t);
    return out;
  }

  std::unique_ptr<BackendRegistry> registry_ = std::make_unique<BackendRegistry>();
  CostModel costs_;
  const Backend* backend_ = nullptr;
};

}  // namespace tmorph::gpu_test
