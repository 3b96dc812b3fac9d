// quant.moments: the moments of Q4_0 and Q8_0 tensors from their codes and scales (on every SIMD target;
// extreme scales and codes; finite scales only) equal those of the
// decoded float32 values: counts, min and max exactly, the sum as the exact sum rounded once (checked
// against an independent element-by-element exact sum), mean and std to the last bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/dequant/ggml_dequant.h"
#include "checkpoint/ggml_quantized.h"
#include "simd_targets.h"
#include "test_support.h"

namespace tmorph {
namespace {

// Random blocks of a 32-element format with normal, subnormal, zero, negative and non-finite scales.
std::vector<uint8_t> random_blocks(uint32_t block_bytes, uint64_t blocks, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(blocks * block_bytes);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  for (uint64_t i = 0; i < blocks; ++i) {
    uint16_t h;
    switch (rng() % 64) {
      case 0: h = 0x0000; break;                                            // +0
      case 1: h = 0x8000; break;                                            // -0
      case 2: h = static_cast<uint16_t>(0x0001 + rng() % 0x3ff); break;     // subnormal
      case 3: h = 0x7c00; break;                                            // +inf
      case 4: h = 0xfe01; break;                                            // NaN
      case 5: h = 0x7bff; break;                                            // 65504, the largest
      default: h = static_cast<uint16_t>((rng() % 2) << 15 | (0x1400 + rng() % 0x2000)); break;  // ~1e-4..1
    }
    std::memcpy(&out[i * block_bytes], &h, 2);
  }
  return out;
}

// Blocks of the largest fp16 scale (either sign) whose codes are all the format's extreme code: the
// largest partial sums the exact accumulators must hold without overflow.
std::vector<uint8_t> extreme_blocks(uint32_t type, uint32_t block_bytes, uint64_t blocks, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(blocks * block_bytes);
  for (uint64_t i = 0; i < blocks; ++i) {
    uint8_t* b = &out[i * block_bytes];
    const uint16_t h = rng() % 4 ? 0x7bff : 0xfbff;  // +-65504
    std::memcpy(b, &h, 2);
    std::memset(b + 2, type == 8 ? 0x80 : 0x00, block_bytes - 2);  // -128 (Q8_0), nibbles 0 = -8 (Q4_0)
  }
  return out;
}

// quant.moments over `bytes` (blocks of `type`) against compute_stats over the decoded floats.
void expect_moments_of_decoded_values(uint32_t type, const std::vector<uint8_t>& bytes) {
  const auto* f = cpu::ggml_block_format(type);
  ASSERT_NE(f, nullptr);
  const uint64_t blocks = bytes.size() / f->block_bytes;
  std::vector<float> values(blocks * 32);
  cpu::dequantize_ggml_blocks(*f, bytes.data(), blocks, values.data());

  auto registry = test::make_registry(false);
  CostModel costs;
  Planner planner(*registry, costs, {});
  StatsOptions options;
  options.histogram = false;
  options.quantiles = false;
  const StatsResult fused = compute_quantized_stats(quantized_tensor(type, bytes.data(), values.size()), planner, options);
  ASSERT_EQ(fused.placement.front().op, "quant.moments") << "the moments came from the decoded values";
  const StatsResult decoded = compute_stats(values.data(), DType::F32, values.size(), planner, options);
  const MomentsSummary &a = fused.moments, &b = decoded.moments;
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.finite_count, b.finite_count);
  EXPECT_EQ(a.nan_count, b.nan_count);
  EXPECT_EQ(a.inf_count, b.inf_count);
  EXPECT_EQ(a.zero_count, b.zero_count);
  EXPECT_EQ(a.min, b.min);
  EXPECT_EQ(a.max, b.max);
  EXPECT_EQ(a.abs_max, b.abs_max);
  // Every finite value is a multiple of 2^-24 below 2^23: scaled by 2^24 it is an exact integer.
  __int128 exact = 0;
  for (float v : values)
    if (std::isfinite(v)) exact += static_cast<__int128>(static_cast<double>(v) * 0x1p24);
  EXPECT_EQ(a.sum, std::ldexp(static_cast<double>(exact), -24)) << "the sum is the exact sum rounded once";
  EXPECT_NEAR(a.mean, b.mean, 1e-13 * std::fabs(b.mean) + 1e-300);
  EXPECT_NEAR(a.std, b.std, 1e-13 * b.std);
}

class QuantMoments : public ::testing::TestWithParam<uint32_t> {};

// Three canonical blocks and a tail (not a multiple of the four blocks the SIMD path takes at once).
constexpr uint64_t kBlocks = 3 * (TM_STATS_BLOCK_ELEMENTS / 32) + 123;

// On every SIMD target compiled in (four blocks at a time with 256-bit vectors or more, one at a time below).
TEST_P(QuantMoments, EqualTheMomentsOfTheDecodedValues) {
  const uint32_t type = GetParam();
  const auto bytes = random_blocks(cpu::ggml_block_format(type)->block_bytes, kBlocks, type);
  test::for_each_simd_target([&](const std::string& target, bool) {
    SCOPED_TRACE(target);
    expect_moments_of_decoded_values(type, bytes);
  });
}

TEST_P(QuantMoments, ExtremeScalesAndCodesStayExact) {
  const uint32_t type = GetParam();
  expect_moments_of_decoded_values(type, extreme_blocks(type, cpu::ggml_block_format(type)->block_bytes, kBlocks, type));
}

// Only finite scales: every group of four blocks takes the SIMD path (none falls back for an inf or NaN).
TEST_P(QuantMoments, FiniteScalesOnly) {
  const uint32_t type = GetParam();
  const uint32_t bb = cpu::ggml_block_format(type)->block_bytes;
  auto bytes = random_blocks(bb, kBlocks, type + 100);
  for (uint64_t i = 0; i < kBlocks; ++i) bytes[i * bb + 1] &= 0xbb;  // exponent bits 4 and 2 cleared: never 31
  expect_moments_of_decoded_values(type, bytes);
}

// Which zero an extreme keeps depends on the order blocks are looked at: every SIMD target (and every
// backend) looks in block order. Block 0 is positive, block 1 all -0, block 2 all +0: the minimum is -0.
TEST_P(QuantMoments, ZeroExtremesFollowBlockOrderOnEverySimdTarget) {
  const uint32_t type = GetParam();
  const uint32_t bb = cpu::ggml_block_format(type)->block_bytes;
  std::vector<uint8_t> bytes(8 * bb, type == 8 ? 0x05 : 0x9a);  // positive codes
  const uint16_t scales[8] = {0x3c00, 0x8000, 0x0000, 0x3c00, 0x4000, 0x3800, 0x0000, 0x3c00};
  for (int i = 0; i < 8; ++i) std::memcpy(&bytes[i * bb], &scales[i], 2);
  test::for_each_simd_target([&](const std::string& target, bool) {
    SCOPED_TRACE(target);
    auto registry = test::make_registry(false);
    CostModel costs;
    Planner planner(*registry, costs, {});
    StatsOptions options;
    options.histogram = false;
    options.quantiles = false;
    const StatsResult r = compute_quantized_stats(quantized_tensor(type, bytes.data(), 8 * 32), planner, options);
    EXPECT_EQ(r.moments.min, 0.0);
    EXPECT_TRUE(std::signbit(r.moments.min)) << "block 1's -0 came first";
  });
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantMoments, ::testing::Values(2u, 8u),
                         [](const auto& info) { return info.param == 2 ? std::string("Q4_0") : std::string("Q8_0"); });

}  // namespace
}  // namespace tmorph
