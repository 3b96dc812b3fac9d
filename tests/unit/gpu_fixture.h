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

  // Runs op on backend `name` (strict placement; the kernel's self-test runs first) over data. Format ops
  // (ggml) pass the format; their element count is the output's float count.
  template <class Out>
  void run(const std::string& name, tm_op op, DType dt, const std::vector<uint8_t>& data, const void* params,
           uint64_t params_size, std::vector<Out>* out, uint32_t format = 0) const {
    const uint64_t elements = tm_op_takes_format(op) ? out->size() * sizeof(Out) / 4 : 0;
    test::run_kernel_on(*registry_, costs_, name, op, dt, data, params, params_size, out, elements, format);
  }

  std::vector<DType> dtypes_of(tm_op op) const { return test::kernel_dtypes(*backend_, op); }

 public:
  // dequantize.ggml of `format` blocks on backend `name`.
  void run_on(const std::string& name, const std::vector<uint8_t>& blocks, const tm_dequantize_ggml_params_v1& params,
              std::vector<float>* out, uint32_t format) const {
    run(name, TM_OP_DEQUANTIZE_GGML, DType::F32, blocks, &params, sizeof params, out, format);
  }

 protected:

  std::unique_ptr<BackendRegistry> registry_ = std::make_unique<BackendRegistry>();
  CostModel costs_;
  const Backend* backend_ = nullptr;
};

}  // namespace tmorph::gpu_test
