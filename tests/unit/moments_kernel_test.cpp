// The CPU block kernel against the block contract of op_contracts.h, written out here in plain
// scalar code: same lanes, same order, so the comparison is bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include <hwy/targets.h>

#include "cpu/moments_kernel.h"
#include "ops/moments.h"
#include "test_support.h"

namespace tmorph {
namespace {

tm_moments_partial_v1 contract_block(DType dtype, const std::vector<uint8_t>& raw, uint64_t first, uint64_t n) {
  const size_t w = dtype_size(dtype);
  double lanes[16] = {}, squares[16] = {}, m2[16] = {};
  tm_moments_partial_v1 p = empty_moments();  // float blocks keep the empty integer fields
  p.count = n;
  p.min = INFINITY, p.max = -INFINITY;
  for (uint64_t i = 0; i < n; ++i) {
    const double x = element_to_double(dtype, raw.data() + (first + i) * w);
    if (std::isnan(x)) { ++p.nan_count; continue; }
    if (x == 0) ++p.zero_count;
    if (std::isinf(x)) { ++p.inf_count; continue; }
    ++p.finite_count;
    lanes[i % 16] += x;
    squares[i % 16] += x * x;
    p.min = std::min(p.min, x), p.max = std::max(p.max, x), p.abs_max = std::max(p.abs_max, std::fabs(x));
  }
  auto reduce = [](double* l) {
    for (int width = 16; width > 1; width /= 2)
      for (int i = 0; i < width / 2; ++i) l[i] = l[2 * i] + l[2 * i + 1];
    return l[0];
  };
  p.sum = reduce(lanes);
  p.mean = p.finite_count ? p.sum / static_cast<double>(p.finite_count) : 0;
  // Floats narrower than f64 (exact squares): single pass when sum * mean <= sumsq / 2.
  if (dtype != DType::F64) {
    const double sumsq = reduce(squares), s_mean = p.sum * p.mean;
    if (s_mean <= sumsq / 2) {
      p.m2 = sumsq - s_mean;
      return p;
    }
  }
  for (uint64_t i = 0; i < n; ++i) {
    const double x = element_to_double(dtype, raw.data() + (first + i) * w);
    if (std::isfinite(x)) m2[i % 16] += (x - p.mean) * (x - p.mean);
  }
  p.m2 = reduce(m2);
  return p;
}

// Every bit pattern of the narrow float types goes through the SIMD decoders exactly.
TEST(MomentsKernel, EveryNarrowFloatPatternMatchesTheContract) {
  for (DType dt : {DType::F16, DType::BF16, DType::F8_E4M3FN, DType::F8_E5M2}) {
    const uint64_t patterns = uint64_t{1} << (8 * dtype_size(dt));
    std::vector<uint8_t> raw(patterns * dtype_size(dt));
    for (uint64_t p = 0; p < patterns; ++p) {
      raw[p * dtype_size(dt)] = static_cast<uint8_t>(p & 0xFF);
      if (dtype_size(dt) == 2) raw[p * 2 + 1] = static_cast<uint8_t>(p >> 8);
    }
    const auto got = cpu::block_moments(dt, raw.data(), patterns);
    test::expect_same_partial(got, contract_block(dt, raw, 0, patterns), std::string(dtype_name(dt)));
  }
}

TEST(MomentsKernel, SaltedFloatBlocksAndShortTailsMatchTheContract) {
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::F8_E4M3FN, DType::F8_E5M2}) {
    const auto raw = test::salted_data(dt, TM_STATS_BLOCK_ELEMENTS, 7);
    for (uint64_t n : {uint64_t{1}, uint64_t{15}, uint64_t{17}, uint64_t{1000}, uint64_t{TM_STATS_BLOCK_ELEMENTS}}) {
      const auto got = cpu::block_moments(dt, raw.data(), n);
      test::expect_same_partial(got, contract_block(dt, raw, 0, n), std::string(dtype_name(dt)) + " n=" + std::to_string(n));
    }
  }
}

// A mean large against the spread (layer-norm weights near 1, say) takes the two-pass m2.
TEST(MomentsKernel, LargeMeanBlocksTakeTheTwoPassM2) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    std::vector<uint8_t> raw(5000 * dtype_size(dt));
    for (size_t i = 0; i < 5000; ++i) {
      const float v = 1.0f + 0.01f * static_cast<float>(i % 7);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      if (dt == DType::F32) std::memcpy(&raw[4 * i], &v, 4);
      if (dt == DType::BF16) raw[2 * i] = (bits >> 16) & 0xFF, raw[2 * i + 1] = bits >> 24;
      if (dt == DType::F16) raw[2 * i] = 0x00, raw[2 * i + 1] = static_cast<uint8_t>(0x3C + (i % 3));  // 1, 1.25, 1.5 ...
    }
    const auto got = cpu::block_moments(dt, raw.data(), 5000);
    test::expect_same_partial(got, contract_block(dt, raw, 0, 5000), std::string(dtype_name(dt)) + " large mean");
    EXPECT_GT(got.m2, 0.0);
  }
}

// Blocks without NaN or Inf take the unmasked fast path; they must still equal the contract.
TEST(MomentsKernel, AllFiniteBlocksMatchTheContract) {
  for (DType dt : {DType::F32, DType::F16, DType::BF16, DType::F8_E4M3FN, DType::F8_E5M2}) {
    auto raw = test::salted_data(dt, TM_STATS_BLOCK_ELEMENTS, 21);
    const size_t w = dtype_size(dt);
    for (uint64_t i = 0; i < TM_STATS_BLOCK_ELEMENTS; ++i)  // replace non-finite values by +0 / -0
      if (!std::isfinite(element_to_double(dt, raw.data() + i * w))) {
        std::memset(raw.data() + i * w, 0, w);
        if (i & 1) raw[i * w + w - 1] = 0x80;
      }
    for (uint64_t n : {uint64_t{16}, uint64_t{1000}, uint64_t{TM_STATS_BLOCK_ELEMENTS}}) {
      const auto got = cpu::block_moments(dt, raw.data(), n);
      EXPECT_EQ(got.nan_count + got.inf_count, 0u);
      test::expect_same_partial(got, contract_block(dt, raw, 0, n), std::string(dtype_name(dt)) + " finite n=" + std::to_string(n));
    }
  }
}

// The same bits on every SIMD target this build carries (SCALAR, SSSE3, SSE4, AVX2, AVX-512, as the CPU
// allows): element i always feeds virtual lane i % 16, whatever the vector width.
TEST(MomentsKernel, EverySimdTargetGivesTheContractResult) {
  std::vector<std::pair<DType, std::vector<uint8_t>>> inputs;
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16, DType::F8_E4M3FN, DType::F8_E5M2}) {
    auto raw = test::salted_data(dt, TM_STATS_BLOCK_ELEMENTS, 3);
    if (dtype_size(dt) == 2)  // every 16-bit pattern, so each decoder sees every class
      for (uint64_t p = 0; p < TM_STATS_BLOCK_ELEMENTS; ++p) raw[2 * p] = p & 0xFF, raw[2 * p + 1] = p >> 8;
    inputs.emplace_back(dt, std::move(raw));
  }
  const auto targets = hwy::SupportedAndGeneratedTargets();
  for (int64_t target : targets) {
    hwy::SetSupportedTargetsForTest(target);
    for (const auto& [dt, raw] : inputs)
      for (uint64_t n : {uint64_t{TM_STATS_BLOCK_ELEMENTS}, uint64_t{1001}})
        test::expect_same_partial(cpu::block_moments(dt, raw.data(), n), contract_block(dt, raw, 0, n),
                    std::string(hwy::TargetName(target)) + " " + std::string(dtype_name(dt)) + " n=" + std::to_string(n));
  }
  hwy::SetSupportedTargetsForTest(0);
  EXPECT_GE(targets.size(), 2u) << "expected the scalar target and at least one SIMD target";
}

TEST(MomentsKernel, AllNonFiniteBlockHasEmptyExtremes) {
  const float v[3] = {NAN, INFINITY, -INFINITY};
  const auto p = cpu::block_moments(DType::F32, v, 3);
  EXPECT_EQ(p.finite_count, 0u);
  EXPECT_EQ(p.nan_count, 1u);
  EXPECT_EQ(p.inf_count, 2u);
  EXPECT_EQ(p.min, INFINITY);
  EXPECT_EQ(p.max, -INFINITY);
  EXPECT_EQ(p.sum, 0.0);
  EXPECT_EQ(p.m2, 0.0);
}

}  // namespace
}  // namespace tmorph
