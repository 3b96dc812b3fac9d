#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tensormorph/cost_model.h"
#include "tensormorph/error.h"
#include "tensormorph/settings.h"

namespace tmorph {
namespace {

std::string temp_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("tm-test-" + name + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

TEST(Settings, RoundTripsKnownKeysAndRefusesUnknownOnes) {
  const std::string path = temp_dir("settings") + "/settings.json";
  Settings s = Settings::load(path);
  EXPECT_FALSE(s.get("compute.prefer"));
  s.set("compute.prefer", "vulkan, cuda");
  s.save();
  const Settings again = Settings::load(path);
  ASSERT_TRUE(again.get("compute.prefer"));
  EXPECT_EQ(split_list(*again.get("compute.prefer")), (std::vector<std::string>{"vulkan", "cuda"}));
  EXPECT_THROW(s.set("compute.prefered", "x"), Error);
  EXPECT_TRUE(s.unset("compute.prefer"));
  EXPECT_FALSE(s.unset("compute.prefer"));
}

TEST(Settings, NumericSettingsAreReadInTheirRangeOrRefusedNamingKeyRangeAndValue) {
  Settings s = Settings::load(temp_dir("numbers") + "/settings.json");
  EXPECT_FALSE(s.number("remote.header_max_age_s", 0, 31536000));
  s.set("remote.header_max_age_s", "90");
  EXPECT_EQ(s.number("remote.header_max_age_s", 0, 31536000), 90.0);
  for (const char* bad : {"-1", "ten", "", "1e9"}) {
    s.set("remote.header_max_age_s", bad);
    try {
      s.number("remote.header_max_age_s", 0, 31536000);
      FAIL() << "no error for '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
      EXPECT_EQ(std::string(e.what()), std::string("setting remote.header_max_age_s: expected a number from 0 to 31536000, got '") + bad + "'");
    }
  }
}

TEST(Settings, CorruptFileIsAnErrorNamingTheFile) {
  const std::string path = temp_dir("corrupt") + "/settings.json";
  std::ofstream(path) << "{ not json";
  try {
    Settings::load(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
}

TEST(CostModel, SavesAndLoadsCalibration) {
  const std::string path = temp_dir("calib") + "/calibration.json";
  CostModel m;
  m.set_throughput("cpu", "host-cpu", TM_OP_STATS_MOMENTS, 12.5e9);
  m.save(path);
  CostModel back;
  back.load(path);
  bool calibrated = false;
  EXPECT_EQ(back.throughput("cpu", "host-cpu", TM_OP_STATS_MOMENTS, &calibrated), 12.5e9);
  EXPECT_TRUE(calibrated);
  EXPECT_EQ(back.throughput("cpu", "host-cpu", TM_OP_STATS_HISTOGRAM, &calibrated), CostModel::kDefaultThroughput);
  EXPECT_FALSE(calibrated);
  std::ofstream(path) << R"({"throughput":[{"backend":"cpu","device_id":"x","op":"stats.nope","bytes_per_s":1}]})";
  CostModel bad;
  EXPECT_THROW(bad.load(path), Error);
}

}  // namespace
}  // namespace tmorph
