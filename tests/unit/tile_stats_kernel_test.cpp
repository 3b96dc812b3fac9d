// The CPU backend's lod.tile_stats kernel (op_contracts.h: TM_OP_LOD_TILE_STATS): malformed calls are refused
// with the reason, a one-row band gives the same tiles whichever runs of whole tiles it is cut into, the
// pattern counts are the elements' bit patterns, and each record's counts and extremes are its elements'.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "tensormorph/contract_math.h"
#include "tensormorph/op_contracts.h"
#include "test_support.h"

namespace tmorph {
namespace {

// Runs the CPU backend's lod.tile_stats kernel; returns the status and writes the message.
tm_status run_cpu(DType dt, const std::vector<uint8_t>& data, uint64_t elements, const tm_tile_stats_params_v1* params,
                  uint64_t params_size, std::vector<tm_tile_stats_v1>& out, std::string* message = nullptr) {
  const tm_backend_v1* cpu = cpu::cpu_backend_table();
  tm_unavailable_reason reason;
  tm_message msg{};
  cpu->init(&reason, &msg);
  uint32_t index = 0;
  for (uint32_t k = 0; k < cpu->kernel_count(); ++k) {
    tm_kernel_cap_v1 cap{};
    cap.struct_size = sizeof cap;
    cpu->kernel_info(k, &cap);
    if (cap.op == TM_OP_LOD_TILE_STATS) index = k;
  }
  tm_kernel_call_v1 call{};
  call.struct_size = sizeof call;
  call.op = TM_OP_LOD_TILE_STATS;
  call.kernel_index = index;
  call.dtype = static_cast<tm_dtype>(dt);
  call.input = data.data();
  call.element_count = elements;
  call.params = params;
  call.params_size = params_size;
  call.output = out.data();
  call.output_size = out.size() * sizeof(tm_tile_stats_v1);
  call.threads = 1;
  const tm_status st = cpu->run(&call, &msg);
  if (message) *message = msg.text;
  return st;
}

TEST(TileStatsKernel, MalformedCallsAreRefusedWithTheReason) {
  const std::vector<uint8_t> data(4 * 1000, 0);
  std::vector<tm_tile_stats_v1> out(4);
  struct Case {
    DType dt;
    tm_tile_stats_params_v1 p;
    uint64_t elements;
    const char* says;
  };
  const Case cases[] = {
      {DType::F32, {10, 100, 48, TM_TILE_SEGMENTS, nullptr}, 1000, "not a power of two"},
      {DType::F32, {10, 100, 65536, TM_TILE_SEGMENTS, nullptr}, 1000, "exceed 65536"},
      {DType::F32, {10, 100, 64, TM_TILE_SEGMENTS, nullptr}, 999, "is not rows 10 x cols 100"},
      {DType::F32, {10, 100, 64, TM_TILE_PATTERNS, nullptr}, 1000, "does not take dtype"},
      {DType::I32, {10, 100, 64, TM_TILE_SEGMENTS, nullptr}, 1000, "does not take dtype"},
      {DType::F32, {10, 100, 64, 7, nullptr}, 1000, "method 7"},
      {DType::F32, {10, 1000, 64, TM_TILE_SEGMENTS, nullptr}, 10000, "tiles need"},
      {DType::F32, {0, 100, 64, TM_TILE_SEGMENTS, nullptr}, 0, "a band of 0 x 100"},
  };
  for (const Case& c : cases) {
    std::string message;
    std::vector<uint8_t> big(c.elements * 4 + 4, 0);
    EXPECT_EQ(run_cpu(c.dt, big, c.elements, &c.p, sizeof c.p, out, &message), TM_ERR_INVALID_ARGUMENT) << c.says;
    EXPECT_NE(message.find("lod.tile_stats: "), std::string::npos) << message;
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
  }
  std::string message;
  const tm_tile_stats_params_v1 p{10, 100, 64, TM_TILE_SEGMENTS, nullptr};
  EXPECT_EQ(run_cpu(DType::F32, data, 1000, &p, sizeof p - 8, out, &message), TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("params missing"), std::string::npos) << message;
}

TEST(TileStatsKernel, OneRowBandsGiveTheSameTilesInAnyRunsOfWholeTiles) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16, DType::I8, DType::U16, DType::F64}) {
    for (uint32_t method : {TM_TILE_PATTERNS, TM_TILE_SEGMENTS, TM_TILE_WIDENED}) {
      if (!tile_stats_method_takes(method, static_cast<uint32_t>(dt))) continue;
      const uint32_t tw = 4096;
      const uint64_t cols = 5 * tw + 1234, tiles = 6;
      const std::vector<uint8_t> data = test::salted_data(dt, cols, 5 + method);
      std::vector<tm_tile_stats_v1> whole(tiles), runs(tiles);
      const tm_tile_stats_params_v1 p{1, cols, tw, method, nullptr};
      ASSERT_EQ(run_cpu(dt, data, cols, &p, sizeof p, whole), TM_OK);
      const size_t w = dtype_size(dt);
      for (uint64_t t0 = 0; t0 < tiles; t0 += 2) {  // runs of two tiles, the last one short
        const uint64_t c0 = t0 * tw, n = std::min<uint64_t>(cols, c0 + 2 * tw) - c0;
        const std::vector<uint8_t> part(data.begin() + static_cast<ptrdiff_t>(c0 * w), data.begin() + static_cast<ptrdiff_t>((c0 + n) * w));
        std::vector<tm_tile_stats_v1> two(2);
        const tm_tile_stats_params_v1 q{1, n, tw, method, nullptr};
        ASSERT_EQ(run_cpu(dt, part, n, &q, sizeof q, two), TM_OK);
        runs[t0] = two[0];
        if (t0 + 1 < tiles) runs[t0 + 1] = two[1];
      }
      for (uint64_t t = 0; t < tiles; ++t)
        EXPECT_EQ(std::memcmp(&whole[t], &runs[t], sizeof whole[t]), 0) << dtype_name(dt) << " method " << method << " tile " << t;
    }
  }
}

TEST(TileStatsKernel, CountsExtremesBucketsAndPatternsAreTheElements) {
  for (DType dt : {DType::BF16, DType::F16, DType::F8_E4M3FN, DType::I8, DType::U8, DType::BOOL, DType::F32, DType::I32}) {
    for (uint32_t method : {TM_TILE_PATTERNS, TM_TILE_SEGMENTS, TM_TILE_WIDENED}) {
      if (!tile_stats_method_takes(method, static_cast<uint32_t>(dt))) continue;
      const uint64_t rows = 37, cols = 1000;
      const uint32_t tw = 512;
      const std::vector<uint8_t> data = test::salted_data(dt, rows * cols, 11);
      const size_t w = dtype_size(dt);
      std::vector<uint64_t> patterns(method == TM_TILE_PATTERNS ? size_t{1} << (8 * w) : 0, 0);
      std::vector<tm_tile_stats_v1> out(2);
      const tm_tile_stats_params_v1 p{rows, cols, tw, method, patterns.empty() ? nullptr : patterns.data()};
      ASSERT_EQ(run_cpu(dt, data, rows * cols, &p, sizeof p, out), TM_OK);
      const std::vector<double> values = test::to_doubles(dt, data);
      std::vector<uint64_t> direct_patterns(patterns.size(), 0);
      for (uint64_t t = 0; t < 2; ++t) {
        uint64_t count = 0, nan = 0, inf = 0, zero = 0, buckets[256] = {};
        double lo = INFINITY, hi = -INFINITY;
        for (uint64_t r = 0; r < rows; ++r)
          for (uint64_t c = t * tw; c < std::min<uint64_t>(cols, (t + 1) * tw); ++c) {
            const uint64_t i = r * cols + c;
            const double x = values[i];
            ++count;
            uint64_t bits = 0;
            std::memcpy(&bits, &data[i * w], w);
            if (!direct_patterns.empty()) ++direct_patterns[bits];
            if (std::isnan(x)) { ++nan; continue; }
            if (std::isinf(x)) { ++inf; continue; }
            zero += x == 0;
            lo = std::min(lo, x), hi = std::max(hi, x);
            // The order key's top byte (op_contracts.h).
            const uint64_t sign = uint64_t{1} << (8 * w - 1), mask = w == 8 ? ~uint64_t{0} : (sign << 1) - 1;
            uint64_t key = bits;
            if (dtype_is_float(dt)) key = (bits & sign) ? ~bits & mask : bits | sign;
            else if (dtype_is_signed_int(dt)) key = bits ^ sign;
            ++buckets[key >> (8 * w - 8)];
          }
        const std::string where = std::string(dtype_name(dt)) + " method " + std::to_string(method) + " tile " + std::to_string(t);
        EXPECT_EQ(out[t].count, count) << where;
        EXPECT_EQ(out[t].nan_count, nan) << where;
        EXPECT_EQ(out[t].inf_count, inf) << where;
        EXPECT_EQ(out[t].zero_count, zero) << where;
        EXPECT_EQ(out[t].min, lo) << where;
        EXPECT_EQ(out[t].max, hi) << where;
        for (int k = 0; k < 256; ++k) EXPECT_EQ(out[t].buckets[k], buckets[k]) << where << " bucket " << k;
      }
      EXPECT_EQ(patterns, direct_patterns) << dtype_name(dt);
    }
  }
}

}  // namespace
}  // namespace tmorph
