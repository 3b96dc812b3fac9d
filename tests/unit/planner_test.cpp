// The planner with real backends: the static CPU backend and the test plugins built beside the tests
// (testaccel: one u8 kernel on a simulated discrete device; testabsent: driver missing;
// testfuture: speaks another ABI).
#include <gtest/gtest.h>

#include <algorithm>

#include "tensormorph/error.h"
#include "tensormorph/stats.h"
#include "test_support.h"

namespace tmorph {
namespace {

OpRequest request(tm_op op, DType dt, uint64_t n) {
  OpRequest r;
  r.op = op;
  r.dtype = dt;
  r.elements = n;
  r.bytes = n * dtype_size(dt);
  return r;
}

Constraints pinned(const std::string& name) {
  Constraints c;
  c.strict_backend = name;
  return c;
}
Constraints preferring(const std::string& name) {
  Constraints c;
  c.prefer = {name};
  return c;
}
Constraints excluding(const std::string& name) {
  Constraints c;
  c.never = {name};
  return c;
}

const Rejection* find_rejection(const Placement& p, const std::string& backend) {
  for (const auto& r : p.rejected)
    if (r.backend == backend) return &r;
  return nullptr;
}

// Runs f and returns the tmorph::Error it throws (fails the test if none).
template <class F>
Error thrown_by(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a tmorph::Error";
  return Error(ErrorKind::Internal, "none");
}

class PlannerTest : public ::testing::Test {
 protected:
  std::unique_ptr<BackendRegistry> reg = test::make_registry(true);
  CostModel costs;
};

TEST_F(PlannerTest, RegistryDiscoversPluginsAndReportsWhyOneIsUnavailable) {
  ASSERT_NE(reg->find("cpu"), nullptr);
  const Backend* accel = reg->find("testaccel");
  ASSERT_NE(accel, nullptr);
  EXPECT_TRUE(accel->available);
  EXPECT_EQ(accel->devices.at(0).kind, TM_DEVICE_GPU);
  EXPECT_EQ(accel->kernels.size(), 2u);  // stats.moments on u8, dequantize.ggml on Q8_0
  const Backend* absent = reg->find("testabsent");
  ASSERT_NE(absent, nullptr);
  EXPECT_FALSE(absent->available);
  EXPECT_EQ(absent->unavailable_reason, "no_driver");
  EXPECT_NE(absent->unavailable_detail.find("driver"), std::string::npos);
  const auto& failures = reg->load_failures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].path.find("testfuture"), std::string::npos);
  EXPECT_EQ(failures[0].reason, "incompatible_abi");
}

TEST_F(PlannerTest, StrictRequestForUnavailableBackendFailsWithItsReason) {
  Planner p(*reg, costs, pinned("testabsent"));
  const Error e = thrown_by([&] { p.place(request(TM_OP_STATS_MOMENTS, DType::F32, 100)); });
  EXPECT_EQ(e.kind(), ErrorKind::Unavailable);
  EXPECT_NE(std::string(e.what()).find("unavailable:no_driver"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("nothing was substituted"), std::string::npos) << e.what();
}

TEST_F(PlannerTest, StrictRequestForUninstalledBackendSaysSo) {
  Planner p(*reg, costs, pinned("vulkan"));
  const Error e = thrown_by([&] { p.place(request(TM_OP_STATS_MOMENTS, DType::F32, 100)); });
  EXPECT_EQ(e.kind(), ErrorKind::Unavailable);
  EXPECT_NE(std::string(e.what()).find("'vulkan' is not installed"), std::string::npos) << e.what();
}

TEST_F(PlannerTest, StrictRequestForMissingKernelFailsAndSubstitutesNothing) {
  Planner p(*reg, costs, pinned("testaccel"));
  const Error e = thrown_by([&] { p.place(request(TM_OP_STATS_MOMENTS, DType::F32, 100)); });
  EXPECT_NE(std::string(e.what()).find("dtype_unsupported"), std::string::npos) << e.what();
  const Error e2 = thrown_by([&] { p.place(request(TM_OP_STATS_HISTOGRAM, DType::U8, 100)); });
  EXPECT_NE(std::string(e2.what()).find("missing_kernel"), std::string::npos) << e2.what();
}

TEST_F(PlannerTest, KernelSizeLimitIsHonoured) {
  Planner strict(*reg, costs, pinned("testaccel"));
  const Error e = thrown_by([&] { strict.place(request(TM_OP_STATS_MOMENTS, DType::U8, (1ull << 32) + 1)); });
  EXPECT_NE(std::string(e.what()).find("too_large"), std::string::npos) << e.what();
  costs.set_throughput("testaccel", "testaccel-0", TM_OP_STATS_MOMENTS, 1e15);  // would win on cost
  const Placement pl = Planner(*reg, costs, {}).place(request(TM_OP_STATS_MOMENTS, DType::U8, (1ull << 32) + 1));
  EXPECT_EQ(pl.backend, "cpu");
  ASSERT_NE(find_rejection(pl, "testaccel"), nullptr);
  EXPECT_EQ(find_rejection(pl, "testaccel")->reason, "too_large");
}

TEST_F(PlannerTest, StrictRequestIsPinnedAndReportsTransfer) {
  Planner p(*reg, costs, pinned("testaccel"));
  const Placement pl = p.place(request(TM_OP_STATS_MOMENTS, DType::U8, 1000));
  EXPECT_EQ(pl.backend, "testaccel");
  EXPECT_EQ(pl.reason, "user_pinned");
  EXPECT_EQ(pl.device_kind, "gpu");
  EXPECT_FALSE(pl.software_adapter);
  EXPECT_EQ(pl.bytes_transferred, 1000u);  // host-resident data crosses the link
  EXPECT_EQ(pl.precision, "exact");
  ASSERT_NE(find_rejection(pl, "cpu"), nullptr);
  EXPECT_EQ(find_rejection(pl, "cpu")->reason, "not_requested");
}

TEST_F(PlannerTest, AutoPicksTheCheapestAndExplainsTheOthers) {
  Planner p(*reg, costs, {});
  // Uncalibrated and under kOpenPluginsAtBytes: the plugins are not considered, the CPU serves it.
  Placement pl = p.place(request(TM_OP_STATS_MOMENTS, DType::U8, 1 << 20));
  EXPECT_EQ(pl.backend, "cpu");
  EXPECT_EQ(pl.reason, "cheapest");
  ASSERT_NE(find_rejection(pl, "testaccel"), nullptr);
  EXPECT_EQ(find_rejection(pl, "testaccel")->reason, "below_open_threshold");
  EXPECT_NE(find_rejection(pl, "testaccel")->detail.find("1.0 MiB"), std::string::npos) << find_rejection(pl, "testaccel")->detail;
  // Uncalibrated at the threshold: same default throughput, so the transfer decides: CPU, no bytes moved.
  pl = p.place(request(TM_OP_STATS_MOMENTS, DType::U8, kOpenPluginsAtBytes));
  EXPECT_EQ(pl.backend, "cpu");
  EXPECT_EQ(pl.reason, "cheapest");
  EXPECT_EQ(pl.bytes_transferred, 0u);
  EXPECT_FALSE(pl.throughput_calibrated);
  ASSERT_NE(find_rejection(pl, "testaccel"), nullptr);
  EXPECT_EQ(find_rejection(pl, "testaccel")->reason, "costlier");
  EXPECT_EQ(find_rejection(pl, "testabsent")->reason, "unavailable:no_driver");

  // Calibrated: the device computes 1000x faster than the CPU; even with the transfer it wins.
  const std::string cpu_id = reg->find("cpu")->devices[0].id;
  costs.set_throughput("cpu", cpu_id, TM_OP_STATS_MOMENTS, 1e9);
  costs.set_throughput("testaccel", "testaccel-0", TM_OP_STATS_MOMENTS, 1e12);
  pl = Planner(*reg, costs, {}).place(request(TM_OP_STATS_MOMENTS, DType::U8, 1 << 20));
  EXPECT_EQ(pl.backend, "testaccel");
  EXPECT_EQ(pl.reason, "cheapest");
  EXPECT_TRUE(pl.throughput_calibrated);
  EXPECT_EQ(pl.bytes_transferred, 1u << 20);

  // A fast CPU keeps host-resident data at home although the device computes faster.
  costs.set_throughput("cpu", cpu_id, TM_OP_STATS_MOMENTS, 20e9);
  pl = Planner(*reg, costs, {}).place(request(TM_OP_STATS_MOMENTS, DType::U8, 1 << 20));
  EXPECT_EQ(pl.backend, "cpu");
  EXPECT_EQ(pl.reason, "resident_data");

  // Only the CPU has a histogram kernel: said when every backend was considered. A small request leaves the
  // plugins out (whatever is open already), so it claims only "cheapest" among those it considered.
  pl = Planner(*reg, costs, {}).place(request(TM_OP_STATS_HISTOGRAM, DType::U8, kOpenPluginsAtBytes));
  EXPECT_EQ(pl.reason, "sole_supporter");
  pl = Planner(*reg, costs, {}).place(request(TM_OP_STATS_HISTOGRAM, DType::U8, 100));
  EXPECT_EQ(pl.reason, "cheapest");
  EXPECT_EQ(find_rejection(pl, "testaccel")->reason, "below_open_threshold");
}

// A small request's placement does not depend on which plugins earlier requests opened.
TEST_F(PlannerTest, ASmallRequestsPlacementIsTheSameWhateverIsOpen) {
  const auto owned = test::make_registry(true);
  const BackendRegistry& fresh = *owned;
  const Planner p(fresh, costs, {});
  const Placement before = p.place(request(TM_OP_STATS_MOMENTS, DType::U8, 100));
  for (size_t i = 0; i < fresh.listed().size(); ++i) EXPECT_EQ(fresh.is_open(i), fresh.listed()[i].origin == "static");
  p.place(request(TM_OP_STATS_MOMENTS, DType::U8, kOpenPluginsAtBytes));  // opens every plugin
  for (size_t i = 0; i < fresh.listed().size(); ++i) EXPECT_TRUE(fresh.is_open(i));
  const Placement after = p.place(request(TM_OP_STATS_MOMENTS, DType::U8, 100));
  EXPECT_EQ(before.backend, after.backend);
  EXPECT_EQ(before.reason, after.reason);
  ASSERT_EQ(before.rejected.size(), after.rejected.size());
  for (size_t i = 0; i < before.rejected.size(); ++i) {
    EXPECT_EQ(before.rejected[i].backend, after.rejected[i].backend);
    EXPECT_EQ(before.rejected[i].reason, after.rejected[i].reason);
    EXPECT_EQ(before.rejected[i].detail, after.rejected[i].detail);
  }
  // Preferring a plugin considers it at any size.
  EXPECT_EQ(p.with(preferring("testaccel")).place(request(TM_OP_STATS_MOMENTS, DType::U8, 100)).backend, "testaccel");
}

TEST_F(PlannerTest, PreferIsHonouredAndItsFallbackReported) {
  Planner p(*reg, costs, preferring("testaccel"));
  Placement pl = p.place(request(TM_OP_STATS_MOMENTS, DType::U8, 100));
  EXPECT_EQ(pl.backend, "testaccel");
  EXPECT_EQ(pl.reason, "user_preferred");
  pl = p.place(request(TM_OP_STATS_MOMENTS, DType::F32, 100));
  EXPECT_EQ(pl.backend, "cpu");
  EXPECT_EQ(pl.reason, "fallback_missing_kernel");
  ASSERT_NE(find_rejection(pl, "testaccel"), nullptr);
  EXPECT_EQ(find_rejection(pl, "testaccel")->reason, "dtype_unsupported");
}

TEST_F(PlannerTest, NeverIsHonoured) {
  const std::string cpu_id = reg->find("cpu")->devices[0].id;
  costs.set_throughput("testaccel", "testaccel-0", TM_OP_STATS_MOMENTS, 1e12);
  Planner p(*reg, costs, excluding("testaccel"));
  Placement pl = p.place(request(TM_OP_STATS_MOMENTS, DType::U8, 1 << 20));
  EXPECT_EQ(pl.backend, "cpu");
  EXPECT_EQ(find_rejection(pl, "testaccel")->reason, "disabled_by_policy");
  Planner none(*reg, costs, excluding("cpu"));
  const Error e = thrown_by([&] { none.place(request(TM_OP_STATS_MOMENTS, DType::F32, 10)); });
  EXPECT_EQ(e.kind(), ErrorKind::Unavailable);
  EXPECT_NE(std::string(e.what()).find("cpu: disabled_by_policy"), std::string::npos) << e.what();
}

TEST_F(PlannerTest, ApproximationRefusedWithoutConsentAndLadderListed) {
  Planner p(*reg, costs, {});
  OpRequest r = request(TM_OP_STATS_QUANTILES, DType::F32, 1'000'000);
  r.memory_budget_bytes = 1 << 20;  // exact selection needs 4 MB
  const Error e = thrown_by([&] { p.place(r); });
  EXPECT_EQ(e.kind(), ErrorKind::PrecisionRefused);
  const std::string msg = e.what();
  EXPECT_NE(msg.find("over_memory_budget"), std::string::npos) << msg;
  EXPECT_NE(msg.find("quantiles.bitpattern_sketch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("quantiles.sampling"), std::string::npos) << msg;
  const auto ladder = p.ladder(r);
  ASSERT_EQ(ladder.size(), 2u);
  EXPECT_EQ(ladder[0].step, "quantiles.bitpattern_sketch");

  r.allowed_approx_steps = {"quantiles.sampling"};
  const Placement pl = p.place(r);
  EXPECT_EQ(pl.approx_step, "quantiles.sampling");
  EXPECT_EQ(pl.consent, "--allow-approx quantiles.sampling");
  EXPECT_EQ(pl.precision, "deterministic");

  r.memory_budget_bytes = 0;  // within budget the exact kernel wins even with consent given
  EXPECT_TRUE(p.place(r).approx_step.empty());
}

TEST_F(PlannerTest, ConsentedSketchBracketsTheExactQuantile) {
  const uint64_t n = 500'000;
  const auto raw = test::salted_data(DType::F32, n, 3);
  Planner p(*reg, costs, {});
  StatsOptions exact_opt;
  const StatsResult exact = compute_stats(raw.data(), DType::F32, n, p, exact_opt);
  StatsOptions opt;
  opt.memory_budget_bytes = 1 << 20;
  opt.histogram = false;
  EXPECT_THROW(compute_stats(raw.data(), DType::F32, n, p, opt), Error);
  opt.allowed_approx_steps = {"quantiles.bitpattern_sketch"};
  const StatsResult approx = compute_stats(raw.data(), DType::F32, n, p, opt);
  EXPECT_FALSE(approx.quantiles_exact);
  EXPECT_EQ(approx.quantile_method, "quantiles.bitpattern_sketch");
  ASSERT_EQ(approx.quantiles.size(), exact.quantiles.size());
  for (size_t i = 0; i < exact.quantiles.size(); ++i) {
    EXPECT_LE(approx.quantiles[i].lo, exact.quantiles[i].value);
    EXPECT_GE(approx.quantiles[i].hi, exact.quantiles[i].value);
    EXPECT_LE(approx.quantiles[i].hi - approx.quantiles[i].lo, std::fabs(exact.quantiles[i].value) * 0x1p-6 + 1e-30);
  }
  const auto& last = approx.placement.back();
  EXPECT_EQ(last.op, "stats.quantiles");
  EXPECT_EQ(last.consent, "--allow-approx quantiles.bitpattern_sketch");
}

// The plugin's kernel implements the block contract: its results equal the CPU reference bit for bit.
TEST_F(PlannerTest, PluginKernelHasParityWithCpu) {
  const uint64_t n = 5 * TM_STATS_BLOCK_ELEMENTS + 99;
  const auto raw = test::salted_data(DType::U8, n, 11);
  StatsOptions opt;
  opt.histogram = false;
  opt.quantiles = false;
  const StatsResult on_cpu = compute_stats(raw.data(), DType::U8, n, Planner(*reg, costs, pinned("cpu")), opt);
  const StatsResult on_plugin =
      compute_stats(raw.data(), DType::U8, n, Planner(*reg, costs, pinned("testaccel")), opt);
  EXPECT_EQ(on_plugin.placement.at(0).backend, "testaccel");
  EXPECT_EQ(on_cpu.moments.int_sum, on_plugin.moments.int_sum);
  EXPECT_EQ(on_cpu.moments.int_min, on_plugin.moments.int_min);
  EXPECT_EQ(on_cpu.moments.int_max, on_plugin.moments.int_max);
  EXPECT_EQ(on_cpu.moments.zero_count, on_plugin.moments.zero_count);
  EXPECT_EQ(on_cpu.moments.mean, on_plugin.moments.mean);
  EXPECT_EQ(on_cpu.moments.std, on_plugin.moments.std);
}


// Residency: data already on a device makes that device cheap for it. The same request that stays on
// the CPU for host data goes to the device when the device holds a copy, with no transfer counted.
TEST(PlannerResidency, DataOnTheDeviceIsCheapThereAndCostsNoTransfer) {
  auto reg = test::make_registry(true);
  CostModel costs;
  const std::string cpu_id = reg->find("cpu")->devices[0].id;
  // The device computes twice as fast as the CPU, but not fast enough to pay for its 8 GB/s link.
  costs.set_throughput("cpu", cpu_id, TM_OP_STATS_MOMENTS, 20e9);
  costs.set_throughput("testaccel", "testaccel-0", TM_OP_STATS_MOMENTS, 40e9);
  OpRequest r;
  r.op = TM_OP_STATS_MOMENTS, r.dtype = DType::U8, r.elements = r.bytes = 1 << 24;
  Placement host = Planner(*reg, costs, {}).place(r);
  EXPECT_EQ(host.backend, "cpu");
  r.residency.devices.insert("testaccel/testaccel-0");
  Placement resident = Planner(*reg, costs, {}).place(r);
  EXPECT_EQ(resident.backend, "testaccel");
  EXPECT_EQ(resident.bytes_transferred, 0u);
  EXPECT_EQ(resident.reason, "cheapest");
  const Rejection* cpu = find_rejection(resident, "cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->reason, "costlier");
  // Only on the device: the CPU would have to bring it back over the device's link.
  r.residency.on_host = false;
  costs.set_throughput("testaccel", "testaccel-0", TM_OP_STATS_MOMENTS, 15e9);  // now slower than the CPU
  Placement device_only = Planner(*reg, costs, {}).place(r);
  EXPECT_EQ(device_only.backend, "testaccel");
  EXPECT_EQ(device_only.reason, "resident_data");
}

// The plugin keeps an uploaded copy and serves a call from it (input_buffer), with the same partials
// as from host data; release frees it. testaccel counts the calls it served from a copy.
TEST(PlannerResidency, PluginServesACallFromItsResidentCopy) {
  auto reg = test::make_registry(true);
  const Backend* accel = reg->find("testaccel");
  ASSERT_TRUE(accel && accel->can_upload);
  EXPECT_FALSE(reg->find("cpu")->can_upload);
  std::vector<uint8_t> data(3 * 65536 + 5);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 3);
  uint64_t handle = 0;
  tm_message msg{};
  ASSERT_EQ(accel->table->upload(0, data.data(), data.size(), &handle, &msg), TM_OK) << msg.text;
  auto moments = [&](uint64_t buffer, uint64_t offset) {
    std::vector<tm_moments_partial_v1> out(3);
    tm_kernel_call_v1 call{};
    call.struct_size = sizeof call;
    call.op = TM_OP_STATS_MOMENTS;
    call.dtype = TM_DTYPE_U8;
    call.input = data.data() + offset;
    call.element_count = data.size() - offset;
    call.output = out.data();
    call.output_size = out.size() * sizeof out[0];
    call.threads = 1;
    call.input_buffer = buffer;
    call.input_offset = offset;
    EXPECT_EQ(accel->table->run(&call, &msg), TM_OK) << msg.text;
    return out;
  };
  const auto from_host = moments(0, 65536), from_copy = moments(handle, 65536);
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(from_host[b].count, from_copy[b].count);
    EXPECT_EQ(from_host[b].sum, from_copy[b].sum);
    EXPECT_EQ(from_host[b].m2, from_copy[b].m2);
  }
  accel->table->release(handle);
}

}  // namespace
}  // namespace tmorph
