// Host-side logic of the CUDA and HIP backends, tested here without a GPU: how a call is cut into pieces
// (gpu_chunks.h), argument validation before anything reaches a device (through the host-emulated build
// of the same table, gpuemu), and how the real plugins describe a machine without their device.
#include "gpu_chunks.h"
#include "test_support.h"

#include <filesystem>

#include "tensormorph/error.h"

namespace tmorph {
namespace {

using gpu::plan_chunks;

TEST(GpuChunks, PiecesAreWholeUnitsCoverTheCallAndRespectTheLimit) {
  EXPECT_TRUE(plan_chunks(0, 65536, 65536 * 4, 1 << 20).empty());
  // 2.5 blocks of f32, at most one block (256 KiB) per piece: three pieces, the last short.
  auto p = plan_chunks(2 * 65536 + 32768, 65536, 65536 * 4, 262144);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].first, 0u);
  EXPECT_EQ(p[0].count, 65536u);
  EXPECT_EQ(p[2].first, 131072u);
  EXPECT_EQ(p[2].count, 32768u);
  // A unit larger than the limit still goes, one per piece (the caller checked the device holds it).
  p = plan_chunks(10 * 1000, 1000, 1 << 20, 4096);
  ASSERT_EQ(p.size(), 10u);
  for (const auto& c : p) EXPECT_EQ(c.count, 1000u);
  // Everything fits: one piece.
  p = plan_chunks(12345, 1, 2, uint64_t{1} << 30);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].count, 12345u);
  // Sizes near 2^64 do not overflow the step.
  p = plan_chunks(UINT64_MAX, uint64_t{1} << 40, 1, UINT64_MAX);
  ASSERT_EQ(p.size(), 1u);
}

class GpuValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_->load_plugins_from(TM_GPUEMU_PLUGIN_DIR);
    emu_ = registry_->find("gpuemu");
    ASSERT_NE(emu_, nullptr) << "the gpuemu test plugin was not built in " TM_GPUEMU_PLUGIN_DIR;
    ASSERT_TRUE(emu_->available) << emu_->unavailable_detail;
  }
  uint32_t kernel(tm_op op) const {
    for (const auto& k : emu_->kernels)
      if (k.op == op) return k.index;
    ADD_FAILURE() << "no kernel for " << op_name(op);
    return 0;
  }
  // Runs a call and returns its status; the message lands in msg_.
  tm_status call(tm_op op, tm_dtype dt, const void* input, uint64_t n, const void* params, uint64_t params_size,
                 void* output, uint64_t output_size, uint32_t kernel_index = UINT32_MAX) {
    tm_kernel_call_v1 c{};
    c.struct_size = sizeof c;
    c.op = op, c.kernel_index = kernel_index == UINT32_MAX ? kernel(op) : kernel_index, c.dtype = dt;
    c.input = input, c.element_count = n, c.params = params, c.params_size = params_size;
    c.output = output, c.output_size = output_size, c.threads = 1;
    msg_ = tm_message{};
    return emu_->table->run(&c, &msg_);
  }
  std::string message() const { return msg_.text; }

  std::unique_ptr<BackendRegistry> registry_ = std::make_unique<BackendRegistry>();
  const Backend* emu_ = nullptr;
  tm_message msg_{};
};

TEST_F(GpuValidation, MalformedCallsAreRefusedWithAReason) {
  std::vector<uint8_t> frames(4 * 100, 1);
  std::vector<uint64_t> out(4 * 8, 0);
  std::vector<uint64_t> offsets = {0, 2};
  std::vector<uint32_t> pixels = {3, 100};  // pixel 100 lies outside a 100-pixel frame
  tm_stem_frame_sums_params_v1 p{100, 10, 1, offsets.data(), pixels.data(), TM_STEM_ALL_PIXELS, 0};
  EXPECT_EQ(call(TM_OP_STEM_FRAME_SUMS, TM_DTYPE_U8, frames.data(), 400, &p, sizeof p, out.data(), out.size() * 8),
            TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message().find("outside the frame"), std::string::npos) << message();
  pixels[1] = 99;
  p.com_list = 5;  // names no list
  EXPECT_EQ(call(TM_OP_STEM_FRAME_SUMS, TM_DTYPE_U8, frames.data(), 400, &p, sizeof p, out.data(), out.size() * 8),
            TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message().find("com_list"), std::string::npos) << message();
  p.com_list = TM_STEM_ALL_PIXELS;
  EXPECT_EQ(call(TM_OP_STEM_FRAME_SUMS, TM_DTYPE_U8, frames.data(), 399, &p, sizeof p, out.data(), out.size() * 8),
            TM_ERR_INVALID_ARGUMENT);  // not whole frames
  EXPECT_NE(message().find("not whole frames"), std::string::npos) << message();
  EXPECT_EQ(call(TM_OP_STEM_FRAME_SUMS, TM_DTYPE_U8, frames.data(), 400, &p, sizeof p, out.data(), 8),
            TM_ERR_INVALID_ARGUMENT);  // output too small
  EXPECT_EQ(call(TM_OP_STEM_FRAME_SUMS, TM_DTYPE_U8, frames.data(), 400, &p, sizeof p, out.data(), out.size() * 8),
            TM_OK)
      << message();
  EXPECT_EQ(out[0], 100u);

  std::vector<double> edges = {0, 1, 1};  // not strictly increasing
  tm_histogram_params_v1 h{2, edges.data()};
  std::vector<uint64_t> counts(4);
  EXPECT_EQ(call(TM_OP_STATS_HISTOGRAM, TM_DTYPE_U8, frames.data(), 10, &h, sizeof h, counts.data(), 32),
            TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message().find("strictly increasing"), std::string::npos) << message();
  h.bins = 0;
  EXPECT_EQ(call(TM_OP_STATS_HISTOGRAM, TM_DTYPE_U8, frames.data(), 10, &h, sizeof h, counts.data(), 32),
            TM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(call(TM_OP_STATS_HISTOGRAM, TM_DTYPE_U8, frames.data(), 10, nullptr, 0, counts.data(), 32),
            TM_ERR_INVALID_ARGUMENT);  // no params
  // A kernel index that runs another op, and a dtype the kernel does not take.
  EXPECT_EQ(call(TM_OP_STATS_HISTOGRAM, TM_DTYPE_U8, frames.data(), 10, &h, sizeof h, counts.data(), 32,
                 kernel(TM_OP_STATS_MOMENTS)),
            TM_ERR_INVALID_ARGUMENT);
  std::vector<tm_moments_partial_v1> partial(1);
  EXPECT_EQ(call(TM_OP_STATS_MOMENTS, TM_DTYPE_U64, frames.data(), 10, nullptr, 0, partial.data(), sizeof partial[0]),
            TM_ERR_UNSUPPORTED);
  EXPECT_NE(message().find("no gpuemu kernel for dtype"), std::string::npos) << message();
  // ggml: a format it has no kernel for, and a count that is not whole blocks.
  tm_dequantize_ggml_params_v1 q{16, 0};  // IQ2_XXS
  std::vector<float> f(64);
  EXPECT_EQ(call(TM_OP_DEQUANTIZE_GGML, TM_DTYPE_F32, frames.data(), 32, &q, sizeof q, f.data(), 256), TM_ERR_UNSUPPORTED);
  q.ggml_type = 8;
  EXPECT_EQ(call(TM_OP_DEQUANTIZE_GGML, TM_DTYPE_F32, frames.data(), 33, &q, sizeof q, f.data(), 256),
            TM_ERR_INVALID_ARGUMENT);
  // display.colorize: NaN thresholds.
  tm_display_colorize_params_v1 d{};
  d.thresholds[7] = NAN;
  std::vector<uint8_t> rgba(TM_DISPLAY_COLORIZE_COUNTS * 8 + 8 * 4);
  EXPECT_EQ(call(TM_OP_DISPLAY_COLORIZE, TM_DTYPE_F64, frames.data(), 8, &d, sizeof d, rgba.data(), rgba.size()),
            TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message().find("threshold 7"), std::string::npos) << message();
}

// The real plugins, on a machine without their device (CI): listed, unavailable, with the reason from the
// runtime (CUDA: no_driver when no driver is installed, driver_too_old for an older one; HIP: no_device),
// and nothing else changes: every op is still placed on the CPU.
TEST(GpuPlugins, WithoutADeviceTheyAreListedUnavailableWithTheReason) {
  auto registry = test::make_registry(false);
  registry->load_plugins_from(TM_PLUGIN_DIR);
  for (const auto& f : registry->load_failures()) ADD_FAILURE() << f.path << ": " << f.reason << ": " << f.detail;
  for (const std::string name : {"cuda", "hip"}) {
    const std::string file = std::string(TM_PLUGIN_DIR) + "/libtensormorph-backend-" + name + ".so";
    if (!std::filesystem::exists(file)) {
      std::printf("[   NOTE   ] %s plugin not built here (toolkit absent)\n", name.c_str());
      continue;
    }
    const Backend* b = registry->find(name);
    ASSERT_NE(b, nullptr) << file;
    if (b->available) {
      std::printf("[   NOTE   ] %s is available here: %s\n", name.c_str(), b->devices.front().name.c_str());
      continue;
    }
    EXPECT_TRUE(b->unavailable_reason == "no_driver" || b->unavailable_reason == "no_device" ||
                b->unavailable_reason == "driver_too_old")
        << name << ": " << b->unavailable_reason << " (" << b->unavailable_detail << ")";
    EXPECT_FALSE(b->unavailable_detail.empty());
    CostModel costs;
    Constraints prefer;
    prefer.prefer = {name};
    OpRequest r;
    r.op = TM_OP_STATS_MOMENTS, r.dtype = DType::F32, r.elements = 1000, r.bytes = 4000;
    const Placement p = Planner(*registry, costs, prefer).place(r);
    EXPECT_EQ(p.backend, "cpu");
    Constraints strict;
    strict.strict_backend = name;
    try {
      Planner(*registry, costs, strict).place(r);
      ADD_FAILURE() << "--backend " << name << " was served without a device";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("unavailable:" + b->unavailable_reason), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tmorph
