// Split placement (Constraints::split; docs/backends.md "Split placement"): one stats.moments op over a tensor's
// canonical blocks shared between the CPU and another backend, each computing its runs of blocks, the partials
// merged on the host in block order. Checked through the real plugins: Vulkan on its driver (lavapipe in CI) and
// the CUDA/HIP kernels under the host grid emulation (gpuemu), every dtype each takes, fed in odd pieces, against
// the CPU alone bit for bit; a backend that fails on its second call hands its blocks to the CPU and the report
// says so; the constraints (strict --backend, --never, off, auto without hardware devices) keep one backend.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>

#include "cpu/cpu_backend.h"
#include "lod/pyramid.h"
#include "ops/tile_stats.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/planner.h"
#include "tensormorph/stats.h"
#include "test_support.h"

namespace tmorph {
namespace {

// Enough canonical blocks (65,536 elements) that every share gets several, past the plugin-opening threshold for
// every dtype, with a short last block.
constexpr uint64_t kElements = 80 * 65536 + 4463;

// The moments of data through a stream placed by `planner`, fed in pieces of odd sizes; the placement it reports.
MomentsSummary streamed(const Planner& planner, DType dt, const std::vector<uint8_t>& data, Placement* placement) {
  MomentsStream stream(planner, dt, kElements, 2);
  test::feed_in_odd_pieces(data.data(), kElements, dtype_size(dt), 700000,
                           [&](const uint8_t* p, uint64_t k) { stream.feed(p, k); });
  MomentsSummary m = stream.finish();
  *placement = stream.placement();
  return m;
}

// A backend that is another backend's table under another name, whose stats.moments calls on the test's data fail
// from the `fail_from`-th on (0: never): a device lost in the middle of a split.
struct Flaky {
  static inline const tm_backend_v1* inner = nullptr;
  static inline std::atomic<int> calls{0};
  static inline int fail_from = 0;
  static inline const uint8_t *data_begin = nullptr, *data_end = nullptr;
  static tm_status run(const tm_kernel_call_v1* call, tm_message* msg) {
    const auto* in = static_cast<const uint8_t*>(call->input);
    if (call->op == TM_OP_STATS_MOMENTS && in >= data_begin && in < data_end && fail_from && ++calls >= fail_from) {
      std::snprintf(msg->text, sizeof msg->text, "injected: the device was lost on call %d", calls.load());
      return TM_ERR_INTERNAL;
    }
    return inner->run(call, msg);
  }
  // One device: the wrapped plugin's process-wide state is initialised once more for this table, and the emulated
  // GPU then counts its device twice.
  static uint32_t one_device() { return inner->device_count() ? 1 : 0; }
  static tm_backend_v1 table(const tm_backend_v1* of, const char* name) {
    inner = of;
    tm_backend_v1 t = *of;
    t.name = name;
    t.run = &Flaky::run;
    t.device_count = &Flaky::one_device;
    return t;
  }
};

class SplitPlacement : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_->register_table(cpu::cpu_backend_table(), "static");
    registry_->load_plugins_from(TM_PLUGIN_DIR);
    registry_->load_plugins_from(TM_GPUEMU_PLUGIN_DIR);
  }

  // The backend `name`, opened; skipped (failed under TM_REQUIRE_VULKAN=1 for vulkan) when it is unavailable.
  const Backend* need(const std::string& name) {
    const Backend* b = registry_->find(name);
    for (size_t i = 0; b && i < registry_->listed().size(); ++i)
      if (registry_->listed()[i].name == name) registry_->open(i);
    if (b && b->available) return b;
    const char* require = std::getenv("TM_REQUIRE_VULKAN");
    if (name == "vulkan" && require && std::string(require) == "1") ADD_FAILURE() << "TM_REQUIRE_VULKAN=1 but Vulkan is unavailable";
    return nullptr;
  }

  Planner planner(SplitMode mode, std::set<std::string> never = {}, std::string strict = {}) const {
    Constraints c;
    c.split = mode;
    c.never = std::move(never);
    c.strict_backend = std::move(strict);
    return Planner(*registry_, costs_, c);
  }

  // Every dtype `other` computes moments for: split over the CPU and `other` equals the CPU alone, bit for bit, and
  // both backends computed blocks.
  void split_equals_the_cpu(const std::string& other) {
    const Backend* b = need(other);
    if (!b) GTEST_SKIP() << other << " is unavailable here";
    std::set<std::string> everything_else;
    for (const auto& x : registry_->listed())
      if (x.name != "cpu" && x.name != other) everything_else.insert(x.name);
    for (DType dt : test::kernel_dtypes(*b, TM_OP_STATS_MOMENTS)) {
      const std::string where = other + " " + std::string(dtype_name(dt));
      const auto data = test::salted_data(dt, kElements, 7 + static_cast<uint64_t>(dt));
      Placement split_at, cpu_at;
      const MomentsSummary split = streamed(planner(SplitMode::On, everything_else), dt, data, &split_at);
      std::set<std::string> not_cpu = everything_else;
      not_cpu.insert(other);
      const MomentsSummary alone = streamed(planner(SplitMode::On, not_cpu), dt, data, &cpu_at);
      test::expect_same_summary(split, alone, where);
      ASSERT_EQ(split_at.split.size(), 2u) << where << ": " << split_at.split_why;
      EXPECT_TRUE(cpu_at.split.empty()) << where;
      uint64_t units = 0, bytes = 0;
      for (const auto& sh : split_at.split) {
        EXPECT_GT(sh.units, 0u) << where << ": " << sh.placement.backend << " computed no block";
        EXPECT_TRUE(sh.failed.empty()) << where << ": " << sh.failed;
        units += sh.units, bytes += sh.bytes;
      }
      EXPECT_EQ(units, (kElements + 65535) / 65536) << where << ": every block once";
      EXPECT_EQ(bytes, kElements * dtype_size(dt)) << where;
      EXPECT_NE(split_at.split_why.find("split over 2 backends"), std::string::npos) << split_at.split_why;
      if (HasFailure()) return;
    }
  }

  std::unique_ptr<BackendRegistry> registry_ = std::make_unique<BackendRegistry>();
  CostModel costs_;
};

TEST_F(SplitPlacement, CpuAndVulkanGiveTheCpusMomentsBitForBit) { split_equals_the_cpu("vulkan"); }

TEST_F(SplitPlacement, CpuAndTheEmulatedGpuGiveTheCpusMomentsBitForBit) { split_equals_the_cpu("gpuemu"); }

TEST_F(SplitPlacement, PyramidTilesSplitOverCpuAndVulkanEqualTheCpus) {
  // Level-0 tiles (lod.tile_stats) shared band by band: every dtype Vulkan's kernel takes, each with the method a
  // pyramid asks of it, fed in odd pieces; the tiles, the bins and the pattern counts behind them equal the CPU's.
  const Backend* vk = need("vulkan");
  if (!vk) GTEST_SKIP() << "vulkan is unavailable here";
  std::set<std::string> others;
  for (const auto& x : registry_->listed())
    if (x.name != "cpu" && x.name != "vulkan") others.insert(x.name);
  std::set<std::string> not_cpu = others;
  not_cpu.insert("vulkan");
  const std::vector<uint64_t> shape = {3, 1024, 1500};
  const uint64_t n = 3 * 1024 * 1500;
  for (DType dt : test::kernel_dtypes(*vk, TM_OP_LOD_TILE_STATS)) {
    const std::string where = std::string(dtype_name(dt));
    const auto data = test::salted_data(dt, n, 31);
    const View2D view = default_view(shape);
    const PlacedTileStats split(planner(SplitMode::On, others), dt, n, 0, 2), cpu(planner(SplitMode::On, not_cpu), dt, n, 0, 2);
    ASSERT_EQ(split.placement().split.size(), 2u) << where << ": " << split.placement().split_why;
    PyramidBuilder pieces(dt, view, split);
    test::feed_in_odd_pieces(data.data(), n, dtype_size(dt), 900000, [&](const uint8_t* p, uint64_t k) { pieces.feed(p, k); });
    const Pyramid a = pieces.finish(), b = build_pyramid(dt, view, data.data(), cpu);
    ASSERT_EQ(a.tiles.size(), b.tiles.size()) << where;
    EXPECT_EQ(a.edges, b.edges) << where;
    for (size_t t = 0; t < a.tiles.size(); ++t) EXPECT_EQ(encode_tile(a.tiles[t]), encode_tile(b.tiles[t])) << where << " tile " << t;
    for (const auto& sh : split.placement().split) EXPECT_GT(sh.units, 0u) << where << ": " << sh.placement.backend << " computed no tile";
    if (HasFailure()) return;
  }
}

TEST_F(SplitPlacement, ABackendFailingOnItsSecondCallHandsItsBlocksToTheCpu) {
  // The emulated GPU's table under another name (the plugin itself is excluded from the split).
  const Backend* gpu = registry_->find("gpuemu");
  if (!gpu) GTEST_SKIP() << "the gpuemu test plugin was not built";
  static tm_backend_v1 flaky = Flaky::table(gpu->table, "flaky");
  registry_->register_table(&flaky, "static");
  std::set<std::string> others;
  for (const auto& x : registry_->listed())
    if (x.name != "cpu" && x.name != "flaky") others.insert(x.name);
  for (DType dt : {DType::F32, DType::BF16, DType::I32}) {
    const auto data = test::salted_data(dt, kElements, 11);
    Flaky::data_begin = data.data(), Flaky::data_end = data.data() + data.size();
    Flaky::calls = 0, Flaky::fail_from = 2;
    Placement at, cpu_at;
    const MomentsSummary split = streamed(planner(SplitMode::On, others), dt, data, &at);
    Flaky::fail_from = 0;
    std::set<std::string> not_cpu = others;
    not_cpu.insert("flaky");
    const MomentsSummary alone = streamed(planner(SplitMode::On, not_cpu), dt, data, &cpu_at);
    const std::string where = std::string(dtype_name(dt));
    test::expect_same_summary(split, alone, where);
    ASSERT_EQ(at.split.size(), 2u) << where;
    const SplitShare& f = at.split[0].placement.backend == "flaky" ? at.split[0] : at.split[1];
    const SplitShare& c = at.split[0].placement.backend == "cpu" ? at.split[0] : at.split[1];
    EXPECT_NE(f.failed.find("injected: the device was lost"), std::string::npos) << where << ": " << f.failed;
    EXPECT_EQ(f.handed_to, "cpu") << where;
    EXPECT_TRUE(c.failed.empty()) << where;
    EXPECT_GT(f.units, 0u) << where << ": its first call's blocks count as its own";
    EXPECT_EQ(f.units + c.units, (kElements + 65535) / 65536) << where << ": nothing counted twice";
    if (HasFailure()) return;
  }
}

TEST_F(SplitPlacement, TheConstraintsKeepOneBackend) {
  if (!need("gpuemu")) GTEST_SKIP() << "gpuemu is unavailable here";
  OpRequest r;
  r.op = TM_OP_STATS_MOMENTS, r.dtype = DType::F32, r.elements = kElements, r.bytes = kElements * 4;
  EXPECT_FALSE(planner(SplitMode::On).place(r).split.empty()) << "a split is possible here";
  EXPECT_TRUE(planner(SplitMode::On, {}, "gpuemu").place(r).split.empty()) << "strict --backend";
  EXPECT_TRUE(planner(SplitMode::On, {}, "cpu").place(r).split.empty()) << "strict --backend";
  EXPECT_TRUE(planner(SplitMode::Off).place(r).split.empty()) << "off";
  // Auto: the emulated GPU and lavapipe are software adapters sharing the host's cores, so nothing is added to the
  // CPU, however large the input.
  r.elements = uint64_t{1} << 30, r.bytes = r.elements * 4;
  EXPECT_TRUE(planner(SplitMode::Auto).place(r).split.empty()) << "auto with software adapters only";
  // --never: a split over what is left, never including the excluded backend.
  std::set<std::string> never;
  for (const auto& x : registry_->listed())
    if (x.name != "cpu" && x.name != "gpuemu") never.insert(x.name);
  const Placement p = planner(SplitMode::On, never).place(r);
  for (const auto& sh : p.split) EXPECT_FALSE(never.count(sh.placement.backend)) << sh.placement.backend;
  // Only ops whose partials merge exactly are split.
  r.op = TM_OP_STATS_QUANTILES;
  EXPECT_TRUE(planner(SplitMode::On).place(r).split.empty()) << "stats.quantiles";
}

}  // namespace
}  // namespace tmorph
