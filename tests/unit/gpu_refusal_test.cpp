// Calls the GPU kernels must refuse before touching any array (quant.moments of another ggml type or of
// partial blocks, a short output; stem.ssb_overlap with a malformed scan or variant): the status and the
// words, for the kernel source under the host grid emulation in CI and on real devices where they exist.
// Instantiated for gpuemu, cuda and hip with the rest of the GpuParity suite (gpu_parity_test.cpp).
#include "gpu_fixture.h"

namespace tmorph::gpu_test {
namespace {

struct Refusal {
  tm_status status = TM_OK;
  std::string message;
};

// Runs op on `backend`'s kernel for it that takes dtype_or_format (its dtype_mask bit), the call built by hand
// (no placement, no self-test).
Refusal call_kernel(const Backend& backend, tm_op op, uint32_t dtype_or_format, const void* input, uint64_t elements,
                    const void* params, uint64_t params_size, void* output, uint64_t output_size) {
  const tm_backend_v1& table = *backend.table;
  tm_kernel_call_v1 call{};
  call.struct_size = sizeof call;
  call.op = op;
  call.kernel_index = UINT32_MAX;
  for (uint32_t k = 0; k < table.kernel_count() && call.kernel_index == UINT32_MAX; ++k) {
    tm_kernel_cap_v1 cap{};
    if (table.kernel_info(k, &cap) == TM_OK && cap.op == op && dtype_or_format < 64 && (cap.dtype_mask >> dtype_or_format & 1))
      call.kernel_index = k;
  }
  call.dtype = tm_op_takes_format(op) ? TM_DTYPE_F32 : static_cast<tm_dtype>(dtype_or_format);  // a format travels in params
  call.input = input, call.element_count = elements, call.params = params, call.params_size = params_size;
  call.output = output, call.output_size = output_size, call.threads = 1;
  tm_message msg{};
  Refusal r;
  r.status = table.run(&call, &msg);
  r.message = msg.text;
  return r;
}

TEST_P(GpuParity, QuantMomentsMalformedCallsAreRefused) {
  std::vector<uint8_t> blocks(34 * 4, 0);  // four Q8_0 blocks of zeros
  std::vector<tm_moments_partial_v1> out(1);
  const uint32_t q8_0 = 8, q4_1 = 3;
  const tm_dequantize_ggml_params_v1 q8{q8_0, 0}, other{q4_1, 0};
  const uint64_t out_bytes = out.size() * sizeof out[0];
  const Refusal ok = call_kernel(*backend_, TM_OP_QUANT_MOMENTS, q8_0, blocks.data(), 128, &q8, sizeof q8, out.data(), out_bytes);
  EXPECT_EQ(ok.status, TM_OK) << ok.message;
  EXPECT_EQ(out[0].count, 128u);
  const Refusal type = call_kernel(*backend_, TM_OP_QUANT_MOMENTS, q8_0, blocks.data(), 128, &other, sizeof other, out.data(), out_bytes);
  EXPECT_EQ(type.status, TM_ERR_UNSUPPORTED);
  EXPECT_NE(type.message.find("quant.moments kernel for ggml type 3"), std::string::npos) << type.message;
  const Refusal partial = call_kernel(*backend_, TM_OP_QUANT_MOMENTS, q8_0, blocks.data(), 100, &q8, sizeof q8, out.data(), out_bytes);
  EXPECT_EQ(partial.status, TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(partial.message.find("100 elements are not whole 32-element blocks"), std::string::npos) << partial.message;
  const Refusal small = call_kernel(*backend_, TM_OP_QUANT_MOMENTS, q8_0, blocks.data(), 128, &q8, sizeof q8, out.data(), out_bytes - 1);
  EXPECT_EQ(small.status, TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(small.message.find("the op needs"), std::string::npos) << small.message;
}

// The SSB call checks are contract_math.h's, shared with the CPU: the same calls are refused with the same words.
TEST_P(GpuParity, SsbOverlapMalformedCallsAreRefusedLikeTheCpu) {
  if (std::none_of(backend_->kernels.begin(), backend_->kernels.end(), [](const auto& k) { return k.op == TM_OP_STEM_SSB_OVERLAP; }))
    GTEST_SKIP() << GetParam() << " has no SSB kernel (no FFT library for it here)";
  const Backend* cpu = registry_->find("cpu");
  ASSERT_NE(cpu, nullptr);
  constexpr uint64_t R = 4, C = 4, B = 2, stride = R * (C / 2 + 1);
  std::vector<float> g(2 * B * stride, 1.0f);
  std::vector<double> k(2 * B, 0.1), dc(B, 1.0), nu(2 * R * C, 0.0), e(2 * R * C, 1.0), rowf(2 * B * R, 1.0), colf(2 * B * C, 1.0),
      out(4 * R * C);
  struct Case {
    const char* what;
    tm_stem_ssb_params_v1 p;
    uint64_t elements;
    const char* words;
  };
  const tm_stem_ssb_params_v1 good{TM_SSB_QUADRATIC, 0, R, C, B, stride, 1.0, k.data(), dc.data(), nu.data(), e.data(), rowf.data(),
                                   colf.data(), nullptr, nullptr, 0};
  std::vector<Case> cases;
  cases.push_back({"a scan of one row", good, g.size(), "scan 1 x 4 outside 2 .. 2^31 positions"});
  cases.back().p.rows = 1;
  cases.push_back({"a stride shorter than a half spectrum", good, g.size(), "pixels or slice_stride out of range"});
  cases.back().p.slice_stride = stride - 1;
  cases.push_back({"element_count that disagrees", good, g.size() - 2, "element_count must be 2 * pixels * slice_stride"});
  cases.push_back({"no e_chi for the quadratic variant", good, g.size(), "the quadratic variant needs e_chi"});
  cases.back().p.e_chi = nullptr;
  cases.push_back({"kmax2 zero", good, g.size(), "kmax2 must be positive"});
  cases.back().p.kmax2 = 0;
  for (const Case& c : cases) {
    const Refusal gpu = call_kernel(*backend_, TM_OP_STEM_SSB_OVERLAP, TM_SSB_QUADRATIC, g.data(), c.elements, &c.p, sizeof c.p,
                                    out.data(), out.size() * sizeof(double));
    const Refusal host = call_kernel(*cpu, TM_OP_STEM_SSB_OVERLAP, TM_SSB_QUADRATIC, g.data(), c.elements, &c.p, sizeof c.p,
                                     out.data(), out.size() * sizeof(double));
    EXPECT_EQ(gpu.status, TM_ERR_INVALID_ARGUMENT) << c.what << ": " << gpu.message;
    EXPECT_EQ(host.status, TM_ERR_INVALID_ARGUMENT) << c.what << ": " << host.message;
    EXPECT_NE(gpu.message.find(c.words), std::string::npos) << c.what << ": " << gpu.message;
    EXPECT_NE(host.message.find(c.words), std::string::npos) << c.what << ": " << host.message;
  }
  const Refusal fine = call_kernel(*backend_, TM_OP_STEM_SSB_OVERLAP, TM_SSB_QUADRATIC, g.data(), g.size(), &good, sizeof good,
                                   out.data(), out.size() * sizeof(double));
  EXPECT_EQ(fine.status, TM_OK) << fine.message;
}

}  // namespace
}  // namespace tmorph::gpu_test
