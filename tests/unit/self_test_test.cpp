// Self-test admission (include/tensormorph/self_test.h): a plugin kernel serves calls only after its
// known-answer case equals the CPU reference. The test plugin testwrong has a deliberately wrong
// stats.moments kernel (refused, the op placed on the CPU with the reason) and a correct
// stats.bitpattern_histogram kernel (admitted); a strict request for the wrong kernel fails naming it.
#include "test_support.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "tensormorph/error.h"

namespace tmorph {
namespace {

std::unique_ptr<BackendRegistry> wrong_registry() {
  auto r = test::make_registry(false);
  r->load_plugins_from(TM_WRONG_PLUGIN_DIR);
  return r;
}

OpRequest u8_request(tm_op op) {
  OpRequest r;
  r.op = op, r.dtype = DType::U8, r.elements = 1 << 20, r.bytes = 1 << 20;
  return r;
}

const Rejection* rejection_of(const Placement& p, const std::string& backend) {
  for (const auto& r : p.rejected)
    if (r.backend == backend) return &r;
  return nullptr;
}

TEST(SelfTest, WrongKernelIsRefusedAndTheOpFallsBackReported) {
  auto registry = wrong_registry();
  ASSERT_NE(registry->find("testwrong"), nullptr);
  ASSERT_TRUE(registry->find("testwrong")->available);
  CostModel costs;
  Constraints prefer;
  prefer.prefer = {"testwrong"};
  const Placement p = Planner(*registry, costs, prefer).place(u8_request(TM_OP_STATS_MOMENTS));
  EXPECT_EQ(p.backend, "cpu");
  const Rejection* r = rejection_of(p, "testwrong");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->reason, "self_test_failed");
  EXPECT_NE(r->detail.find("stats.moments on u8"), std::string::npos) << r->detail;
  EXPECT_NE(r->detail.find("differs from the CPU"), std::string::npos) << r->detail;

  const auto verdicts = registry->self_tests().verdicts();
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].backend, "testwrong");
  EXPECT_EQ(verdicts[0].status, "failed");
  EXPECT_EQ(verdicts[0].driver_version, "wrong-1");
}

TEST(SelfTest, CorrectKernelOfTheSameBackendIsAdmittedOnce) {
  auto registry = wrong_registry();
  CostModel costs;
  Constraints prefer;
  prefer.prefer = {"testwrong"};
  for (int i = 0; i < 3; ++i) {  // the verdict is cached: one test, three placements
    const Placement p = Planner(*registry, costs, prefer).place(u8_request(TM_OP_STATS_BITPATTERN_HISTOGRAM));
    EXPECT_EQ(p.backend, "testwrong");
  }
  const auto verdicts = registry->self_tests().verdicts();
  ASSERT_EQ(verdicts.size(), 1u);
  EXPECT_EQ(verdicts[0].status, "passed") << verdicts[0].detail;
  EXPECT_EQ(verdicts[0].op, "stats.bitpattern_histogram");
  EXPECT_EQ(verdicts[0].input, "u8");
}

TEST(SelfTest, StrictRequestForARefusedKernelFailsNamingTheSelfTest) {
  auto registry = wrong_registry();
  CostModel costs;
  Constraints strict;
  strict.strict_backend = "testwrong";
  try {
    Planner(*registry, costs, strict).place(u8_request(TM_OP_STATS_MOMENTS));
    FAIL() << "a kernel that failed its self-test served a strict request";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Unavailable);
    EXPECT_NE(std::string(e.what()).find("self-test"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("testwrong"), std::string::npos) << e.what();
  }
}

TEST(SelfTest, ReferenceKernelsAreNotTestedAndOtherPluginsPass) {
  auto registry = test::make_registry(true);  // cpu + testaccel (whose kernels are correct)
  CostModel costs;
  const Placement cpu_only = Planner(*registry, costs, Constraints{}).place(u8_request(TM_OP_STATS_HISTOGRAM));
  EXPECT_EQ(cpu_only.backend, "cpu");
  Constraints prefer;
  prefer.prefer = {"testaccel"};
  const Placement p = Planner(*registry, costs, prefer).place(u8_request(TM_OP_STATS_MOMENTS));
  EXPECT_EQ(p.backend, "testaccel");
  const auto verdicts = registry->self_tests().verdicts();
  ASSERT_EQ(verdicts.size(), 1u);  // nothing recorded for the CPU's own kernels
  EXPECT_EQ(verdicts[0].backend, "testaccel");
  EXPECT_EQ(verdicts[0].status, "passed") << verdicts[0].detail;
}

}  // namespace
}  // namespace tmorph

namespace tmorph {
namespace {

// Verdicts persist in the cache file: a second registry (another process, in effect) reads the failed verdict
// instead of running the test, and a damaged cache file is ignored.
TEST(SelfTest, VerdictsPersistInTheCacheFileAndADamagedFileIsIgnored) {
  const std::string dir = ::testing::TempDir() + "/tm-self-test-cache-" + std::to_string(::getpid());
  const std::string file = dir + "/self-tests.json";
  std::filesystem::remove_all(dir);
  CostModel costs;
  Constraints prefer;
  prefer.prefer = {"testwrong"};
  {
    auto registry = wrong_registry();
    registry->set_self_test_cache_file(file);
    EXPECT_EQ(Planner(*registry, costs, prefer).place(u8_request(TM_OP_STATS_MOMENTS)).backend, "cpu");
    ASSERT_FALSE(registry->self_tests().verdicts().at(0).cached);
  }
  ASSERT_TRUE(std::filesystem::exists(file));
  {
    auto registry = wrong_registry();
    registry->set_self_test_cache_file(file);
    const Placement p = Planner(*registry, costs, prefer).place(u8_request(TM_OP_STATS_MOMENTS));
    EXPECT_EQ(p.backend, "cpu");
    const auto v = registry->self_tests().verdicts();
    ASSERT_EQ(v.size(), 1u);
    EXPECT_TRUE(v[0].cached);
    EXPECT_EQ(v[0].status, "failed");
  }
  { std::ofstream(file, std::ios::trunc) << "{\"version\": 1, \"verdicts\": [tru"; }
  {
    auto registry = wrong_registry();
    registry->set_self_test_cache_file(file);
    EXPECT_EQ(Planner(*registry, costs, prefer).place(u8_request(TM_OP_STATS_MOMENTS)).backend, "cpu");
    const auto v = registry->self_tests().verdicts();
    ASSERT_EQ(v.size(), 1u);
    EXPECT_FALSE(v[0].cached);  // tested again
    EXPECT_EQ(v[0].status, "failed");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tmorph
