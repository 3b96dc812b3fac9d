#include <gtest/gtest.h>

#include <cmath>

#include "tensormorph/dtype.h"

namespace tmorph {
namespace {

TEST(DType, Float16DecodesEveryClass) {
  EXPECT_EQ(f16_to_double(0x3C00), 1.0);
  EXPECT_EQ(f16_to_double(0xC000), -2.0);
  EXPECT_EQ(f16_to_double(0x7BFF), 65504.0);
  EXPECT_EQ(f16_to_double(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(f16_to_double(0x0400), std::ldexp(1.0, -14));
  EXPECT_TRUE(std::signbit(f16_to_double(0x8000)));
  EXPECT_EQ(f16_to_double(0x7C00), INFINITY);
  EXPECT_EQ(f16_to_double(0xFC00), -INFINITY);
  EXPECT_TRUE(std::isnan(f16_to_double(0x7E00)));
  EXPECT_TRUE(std::isnan(f16_to_double(0x7C01)));
}

TEST(DType, BFloat16Decodes) {
  EXPECT_EQ(bf16_to_double(0x3F80), 1.0);
  EXPECT_EQ(bf16_to_double(0xC0A0), -5.0);
  EXPECT_EQ(bf16_to_double(0x7F80), INFINITY);
  EXPECT_TRUE(std::isnan(bf16_to_double(0x7FC1)));
  EXPECT_EQ(bf16_to_double(0x0001), std::ldexp(1.0, -133));
}

TEST(DType, Float8E4M3FnFollowsOcp) {
  EXPECT_EQ(f8_e4m3fn_to_double(0x38), 1.0);
  EXPECT_EQ(f8_e4m3fn_to_double(0x7E), 448.0);    // largest finite
  EXPECT_EQ(f8_e4m3fn_to_double(0xFE), -448.0);
  EXPECT_EQ(f8_e4m3fn_to_double(0x01), std::ldexp(1.0, -9));  // smallest subnormal
  EXPECT_EQ(f8_e4m3fn_to_double(0x08), std::ldexp(1.0, -6));  // smallest normal
  EXPECT_EQ(f8_e4m3fn_to_double(0x78), 256.0);    // exponent 15 is finite in E4M3FN
  EXPECT_TRUE(std::isnan(f8_e4m3fn_to_double(0x7F)));
  EXPECT_TRUE(std::isnan(f8_e4m3fn_to_double(0xFF)));
}

TEST(DType, Float8E5M2IsTopByteOfHalf) {
  EXPECT_EQ(f8_e5m2_to_double(0x3C), 1.0);
  EXPECT_EQ(f8_e5m2_to_double(0x7B), 57344.0);
  EXPECT_EQ(f8_e5m2_to_double(0x01), std::ldexp(1.0, -16));
  EXPECT_EQ(f8_e5m2_to_double(0x7C), INFINITY);
  EXPECT_TRUE(std::isnan(f8_e5m2_to_double(0x7D)));
}

TEST(DType, ParsesNamesAndAliases) {
  EXPECT_EQ(parse_dtype("bf16"), DType::BF16);
  EXPECT_EQ(parse_dtype("BFloat16"), DType::BF16);
  EXPECT_EQ(parse_dtype("float8_e4m3fn"), DType::F8_E4M3FN);
  EXPECT_EQ(parse_dtype("F32"), DType::F32);
  EXPECT_EQ(parse_dtype("uint64"), DType::U64);
  EXPECT_FALSE(parse_dtype("f17").has_value());
  for (DType t : kAllDTypes) EXPECT_EQ(parse_dtype(dtype_name(t)), t) << dtype_name(t);
}

TEST(DType, ElementToDoubleCoversIntegers) {
  const int64_t big = INT64_MIN;
  EXPECT_EQ(element_to_double(DType::I64, &big), -9223372036854775808.0);
  const uint8_t t = 7;
  EXPECT_EQ(element_to_double(DType::BOOL, &t), 1.0);
}

}  // namespace
}  // namespace tmorph
