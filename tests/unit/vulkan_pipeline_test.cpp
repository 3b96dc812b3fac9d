// The Vulkan backend inside the statistics pipeline: pinned and preferred placement, refusal and
// fallback for a dtype it lacks, residency (kernels reading a device copy; a tensor moved once), and
// several host threads calling the plugin at once.
#include <algorithm>
#include <thread>

#include "vulkan_fixture.h"

namespace tmorph::vulkan_test {
namespace {

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
    for (uint64_t k = 0; k < blocks; ++k) test::expect_same_partial(b[k], a[k], "resident block " + std::to_string(k));
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
          test::expect_same_partial(on_vulkan[t][b], on_cpu[t][b], "thread " + std::to_string(t) + " block " + std::to_string(b));
      }
    });
  for (auto& th : threads) th.join();
}

}  // namespace
}  // namespace tmorph::vulkan_test

namespace tmorph::vulkan_test {
namespace {

// The memory path of a discrete GPU (device-local buffers, staging uploads, readback copies), forced on
// whatever device this is (TENSORMORPH_VULKAN_DISCRETE_MEMORY=1, read when the plugin initialises).
class VulkanDiscreteMemory : public VulkanParity {
 protected:
  ScopedEnv discrete_{"TENSORMORPH_VULKAN_DISCRETE_MEMORY", "1"};
  ScopedEnv chunks_{"TENSORMORPH_VULKAN_CHUNK_BYTES", "262144"};
};

TEST_F(VulkanDiscreteMemory, EveryKernelAndResidencyEqualTheCpu) {
  for (DType dt : {DType::F32, DType::BF16, DType::U8}) {
    const uint64_t n = 3 * 65536 + 4321;
    const auto data = test::salted_data(dt, n, 31);
    Constraints on_vulkan, on_cpu;
    on_vulkan.strict_backend = "vulkan", on_cpu.strict_backend = "cpu";
    const StatsResult v = compute_stats(data.data(), dt, n, Planner(*registry_, costs_, on_vulkan), StatsOptions{});
    const StatsResult c = compute_stats(data.data(), dt, n, Planner(*registry_, costs_, on_cpu), StatsOptions{});
    EXPECT_EQ(v.moments.sum, c.moments.sum) << dtype_name(dt);
    EXPECT_EQ(v.moments.std, c.moments.std) << dtype_name(dt);
    EXPECT_EQ(v.moments.min, c.moments.min) << dtype_name(dt);
    EXPECT_EQ(v.moments.nan_count, c.moments.nan_count) << dtype_name(dt);
    ASSERT_TRUE(v.histogram && c.histogram);
    EXPECT_EQ(v.histogram->counts, c.histogram->counts) << dtype_name(dt);
    for (size_t q = 0; q < v.quantiles.size(); ++q) EXPECT_EQ(v.quantiles[q].value, c.quantiles[q].value);
    const uint64_t blocks = (n + 65535) / 65536;
    std::vector<tm_moments_partial_v1> pv(blocks), pc(blocks);
    run("vulkan", TM_OP_STATS_MOMENTS, dt, data, nullptr, 0, &pv);
    run("cpu", TM_OP_STATS_MOMENTS, dt, data, nullptr, 0, &pc);
    for (uint64_t b = 0; b < blocks; ++b) test::expect_same_partial(pv[b], pc[b], std::string(dtype_name(dt)));
  }
}

}  // namespace
}  // namespace tmorph::vulkan_test
