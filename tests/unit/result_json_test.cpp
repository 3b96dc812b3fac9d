// The one result encoder (app/result_json.h) and its rule for non-finite numbers (core/json_number.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "app/result_json.h"
#include "core/json_number.h"
#include "ops/placement_json.h"

namespace tmorph {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

TEST(JsonNumber, FiniteIsANumberNonFiniteIsALosslessString) {
  EXPECT_EQ(json_number(1.5), nlohmann::json(1.5));
  EXPECT_TRUE(json_number(1.5).is_number_float());
  EXPECT_EQ(json_number(-0.0).dump(), "-0.0");
  EXPECT_EQ(json_number(std::numeric_limits<double>::max()), nlohmann::json(std::numeric_limits<double>::max()));
  EXPECT_EQ(json_number(std::numeric_limits<double>::denorm_min()).get<double>(), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(json_number(kInfinity), "inf");
  EXPECT_EQ(json_number(-kInfinity), "-inf");
  EXPECT_EQ(json_number(kNaN), "nan");
  EXPECT_EQ(json_number(-kNaN), "nan");                // the sign bit of a NaN is not a value: never "-nan"
  EXPECT_EQ(json_number(std::nan("0x123")), "nan");    // nor is its payload
  EXPECT_EQ(json_numbers({0.5, kInfinity, -kInfinity, kNaN}), nlohmann::json::parse(R"([0.5, "inf", "-inf", "nan"])"));
}

TEST(JsonNumber, ReadsBackWhatItWrites) {
  for (double v : {0.0, -2.25, 1e300, kInfinity, -kInfinity}) EXPECT_EQ(number_from_json(json_number(v)), v);
  EXPECT_TRUE(std::isnan(*number_from_json(json_number(kNaN))));
  EXPECT_EQ(number_from_json(nlohmann::json(7)), 7.0);
  EXPECT_FALSE(number_from_json(nullptr));  // null is a missing value, not a number
  EXPECT_FALSE(number_from_json("Infinity"));
  EXPECT_FALSE(number_from_json("-nan"));
}

StatsResult no_finite_values() {
  // Every value NaN or infinite: no finite min or max, NaN quantiles, an integer count beyond 2^53.
  StatsResult r;
  MomentsSummary& m = r.moments;
  m.count = (uint64_t{1} << 53) + 1, m.nan_count = 1, m.inf_count = m.count - 1;
  m.min = kInfinity, m.max = -kInfinity, m.abs_max = 0, m.sum = 0, m.mean = kNaN, m.std = kNaN;
  r.histogram = Histogram{{-0.5, kInfinity}, {0}, 0, 0};
  r.quantiles = {{0.5, kNaN, -kInfinity, kInfinity, 0}};
  r.quantile_method = "quantiles.sampling";
  r.quantiles_exact = false;
  return r;
}

TEST(ResultJson, StatisticsWriteNonFiniteNumbersByTheOneRule) {
  const nlohmann::json j = app::stats_json(no_finite_values());
  EXPECT_EQ(j["min"], "inf");
  EXPECT_EQ(j["max"], "-inf");
  EXPECT_EQ(j["abs_max"], 0.0);
  EXPECT_EQ(j["mean"], "nan");
  EXPECT_EQ(j["std"], "nan");
  EXPECT_EQ(j["histogram"]["edges"], nlohmann::json::parse(R"([-0.5, "inf"])"));
  const auto& q = j["quantiles"]["values"][0];
  EXPECT_EQ(q["p"], 0.5);
  EXPECT_EQ(q["value"], "nan");
  EXPECT_EQ(q["lo"], "-inf");
  EXPECT_EQ(q["hi"], "inf");
  // Counts stay exact integers, whatever their size.
  EXPECT_TRUE(j["count"].is_number_unsigned());
  EXPECT_EQ(j["count"].get<uint64_t>(), (uint64_t{1} << 53) + 1);
  EXPECT_NE(j.dump().find("\"count\":9007199254740993"), std::string::npos);
  EXPECT_EQ(j["inf_count"].get<uint64_t>(), uint64_t{1} << 53);
  EXPECT_FALSE(j.contains("exact"));
  // Nothing in the document is written as null.
  EXPECT_EQ(j.dump().find("null"), std::string::npos) << j.dump();
}

TEST(ResultJson, MomentsOfIntegersKeepTheirExactDecimalStrings) {
  MomentsSummary m;
  m.count = 3, m.finite_count = 3, m.min = -9007199254740993.0, m.max = 1, m.sum = 1;
  m.is_integer = true, m.int_min = "-9007199254740993", m.int_max = "1", m.int_sum = "18446744073709551617";
  const nlohmann::json j = app::moments_json(m);
  EXPECT_EQ(j["exact"], nlohmann::json({{"min", "-9007199254740993"}, {"max", "1"}, {"sum", "18446744073709551617"}}));
  EXPECT_TRUE(j["min"].is_number_float());
  EXPECT_EQ(app::stats_json({m, std::nullopt, {}, "", true, {}}), j);  // no histogram, no quantiles: the moments
}

TEST(ResultJson, CompareFiguresAndPlacements) {
  TensorDiff d;
  d.count = 4, d.nonfinite = 1, d.rmse = 0, d.max_abs = 0, d.rel_error = 0, d.cosine = kNaN, d.snr_db = kInfinity;
  Placement p;
  p.op = "compare.diff_moments", p.backend = "cpu", p.estimated_seconds = kInfinity;
  d.placement = {p};
  const nlohmann::json j = app::compare_json(d);
  EXPECT_EQ((std::vector<nlohmann::json>{j["count"], j["nonfinite"], j["rmse"], j["cosine"], j["snr_db"]}),
            (std::vector<nlohmann::json>{4, 1, 0.0, "nan", "inf"}));
  EXPECT_EQ(j["placement"], placements_json(d.placement));
  EXPECT_EQ(j["placement"][0]["estimated_seconds"], "inf");
  // The index stores placements in this encoding and reads them back.
  EXPECT_EQ(placements_from_json(j["placement"])[0].estimated_seconds, kInfinity);
}

TEST(ResultJson, QuantizationStatistics) {
  QuantizationStats q;
  q.bits_per_weight = 4.5;
  q.scales = no_finite_values();
  EXPECT_EQ(app::quantization_stats_json(q)["code_counts"], nullptr);  // codes not counted
  EXPECT_FALSE(app::quantization_stats_json(q).contains("saturated_fraction"));
  EXPECT_EQ(app::quantization_stats_json(q)["block_scales"], app::stats_json(*q.scales));
  EXPECT_EQ(app::quantization_stats_json(q)["block_mins"], nullptr);
  q.code_bits = 1, q.code_counts = {3, 1}, q.codes = 4, q.saturated = 1;
  const nlohmann::json j = app::quantization_stats_json(q);
  EXPECT_EQ(j["code_counts"], nlohmann::json({3, 1}));
  EXPECT_EQ(j["saturated_fraction"], 0.25);
  EXPECT_EQ(j["bits_per_weight"], 4.5);
}

}  // namespace
}  // namespace tmorph
