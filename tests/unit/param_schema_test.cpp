// The one parser and checker of declared request parameters (core/param_schema.h) and the 4D-STEM declarations
// (stem/runs/request_params.h): the strict grammar, the ranges, the messages each face gives, and the checks of typed
// requests that keep a bad value from reaching a kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "core/param_schema.h"
#include "stem/runs/request_params.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace {

std::string refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    return e.what();
  }
  return "";
}

TEST(ParamSchema, DecimalsAreStrict) {
  double v = 0;
  for (const char* good : {"0", "-1", "1.5", "-0.25", ".5", "5.", "2e-3", "1E+2", "12345678901234"}) EXPECT_TRUE(parse_decimal(good, v)) << good;
  for (const char* bad : {"", "+1", " 1", "1 ", "0x10", "nan", "inf", "-inf", "1e", "e5", "-", ".", "1,5", "1e400", "--1", "1.2.3"})
    EXPECT_FALSE(parse_decimal(bad, v)) << bad;
  ASSERT_TRUE(parse_decimal("-2.5e1", v));
  EXPECT_EQ(v, -25.0);
}

TEST(ParamSchema, EachFaceSpellsTheParameterAndSharesTheRest) {
  const ParamSpec& c12 = ssb_params().at("c12");
  EXPECT_EQ(refusal([&] { parse_number(c12, Face::Http, "-1"); }), "parameter 'c12': expected a number from 0 to 10000000 (Å), got '-1'");
  EXPECT_EQ(refusal([&] { parse_number(c12, Face::Cli, "-1"); }), "--C12: expected a number from 0 to 10000000 (Å), got '-1'");
  EXPECT_EQ(refusal([&] { check_number(c12, Face::Python, -1); }), "C12: expected a number from 0 to 10000000 (Å), got '-1'");
  EXPECT_EQ(refusal([&] { check_number(c12, Face::Python, std::nan("")); }), "C12: expected a number from 0 to 10000000 (Å), got 'nan'");
  const ParamSpec& radius = product_params().at("radius");  // lo excluded
  EXPECT_EQ(refusal([&] { parse_number(radius, Face::Http, "0"); }),
            "parameter 'radius': expected a number in (0, 1000000] (detector pixels), got '0'");
  EXPECT_EQ(parse_number(radius, Face::Http, "1e-3"), 1e-3);
}

TEST(ParamSchema, SwitchesChoicesCountsAndLists) {
  const ParamSpec& max = product_params().at("max");
  EXPECT_TRUE(parse_switch(max, Face::Http, "1"));
  EXPECT_FALSE(parse_switch(max, Face::Http, "false"));
  for (const char* bad : {"", "abc", "nan", "2", "True"}) EXPECT_NE(refusal([&] { parse_switch(max, Face::Http, bad); }), "") << bad;
  EXPECT_EQ(refusal([&] { parse_choice(product_params().at("of"), Face::Http, "com"); }),
            "parameter 'of': expected mean-dp, bf, abf, adf, haadf, df or mask, got 'com'");
  const ParamSpec& steps = movie_params().at("steps");
  EXPECT_EQ(parse_count(steps, Face::Http, "512"), 512u);
  for (const char* bad : {"0", "513", "-1", "+1", "1.0", "", "9999999999999999"}) EXPECT_NE(refusal([&] { parse_count(steps, Face::Http, bad); }), "") << bad;
  const ParamSpec& region = product_params().at("scan_region");
  EXPECT_EQ(parse_counts(region, Face::Http, "0,4,1,5"), (std::vector<uint64_t>{0, 4, 1, 5}));
  for (const char* bad : {"0,4,1", "0,4,1,5,6", "0,,1,5", "0,4,1,", "a,b,c,d", "0,4,1,-5"})
    EXPECT_NE(refusal([&] { parse_counts(region, Face::Http, bad); }), "") << bad;
  const ParamSpec& center = product_params().at("center");
  EXPECT_EQ(parse_numbers(center, Face::Http, "15.5,-2"), (std::vector<double>{15.5, -2}));
  EXPECT_NE(refusal([&] { parse_numbers(center, Face::Http, "1,nan"); }), "");
}

TEST(ParamSchema, UnknownNamesAreRefusedListingWhatTheOperationTakes) {
  const std::string m = refusal([] { refuse_unknown(ssb_params(), Face::Python, "c10"); });
  EXPECT_EQ(m.rfind("c10: not a parameter of stem.ssb (it takes C10, C12, phi12, ", 0), 0u) << m;
  EXPECT_EQ(ssb_params().find(Face::Http, "c10"), &ssb_params().at("C10"));
  EXPECT_EQ(ssb_params().find(Face::Http, "C10"), nullptr);
  EXPECT_EQ(stem_operation("stem.nothing"), nullptr);
}

TEST(ParamSchema, TypedRequestsAreCheckedBeforeAnyKernel) {
  ProductSpec spec;
  spec.kind = ProductKind::mask;
  spec.detector.inner_px = -1;
  EXPECT_EQ(refusal([&] { check_product_request(spec, Face::Python); }),
            "inner: expected a number from 0 to 1000000 (detector pixels), got '-1'");
  spec.detector.inner_px = 2, spec.detector.outer_px = std::numeric_limits<double>::infinity();
  EXPECT_NE(refusal([&] { check_product_request(spec, Face::Python); }), "");
  spec.detector.outer_px = 8;
  spec.load.detector_bin = {1, 0};
  EXPECT_EQ(refusal([&] { check_product_request(spec, Face::Http); }),
            "parameter 'detector_bin': expected an integer from 1 to 1024 (detector pixels per side), got '0'");
  spec.load.detector_bin = {2, 2};
  EXPECT_EQ(refusal([&] { check_product_request(spec, Face::Http); }), "");

  SsbRunRequest ssb;
  ssb.setup.semiangle_mrad.value = 1e308;
  EXPECT_EQ(refusal([&] { check_ssb_request(ssb, Face::Http); }),
            "parameter 'semiangle_mrad': expected a number in (0, 1000] (mrad), got '1e+308'");
  ssb.setup.semiangle_mrad.value = 20;
  ssb.setup.energy_ev.value = 300e3;
  EXPECT_EQ(refusal([&] { check_ssb_request(ssb, Face::Cli); }), "");
  ssb.setup.disk.center = std::array<double, 2>{1, std::nan("")};
  EXPECT_NE(refusal([&] { check_ssb_request(ssb, Face::Cli); }), "");
}

}  // namespace
}  // namespace tmorph
