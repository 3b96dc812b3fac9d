// The CPU backend's diff.tile_stats kernel (op_contracts.h: TM_OP_DIFF_TILE_STATS) against the contract read
// literally (one pair at a time, the 8 lanes as arrays): every field of every tile bit for bit, for segments of
// every length around the 8 lanes and the vector widths, with and without NaN and infinities; the same tiles
// whether a band's rows come in one call or one per call, on one thread or several; malformed calls refused
// with the reason.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "tensormorph/op_contracts.h"

namespace tmorph {
namespace {

tm_status run_cpu(const std::vector<double>& a, const std::vector<double>& b, uint64_t elements,
                  const tm_diff_tile_params_v1& p, std::vector<tm_diff_tile_v1>& out, unsigned threads = 1,
                  std::string* message = nullptr) {
  const tm_backend_v1* cpu = cpu::cpu_backend_table();
  tm_unavailable_reason reason;
  tm_message msg{};
  cpu->init(&reason, &msg);
  uint32_t index = cpu->kernel_count();
  for (uint32_t k = 0; k < cpu->kernel_count(); ++k) {
    tm_kernel_cap_v1 cap{};
    cap.struct_size = sizeof cap;
    cpu->kernel_info(k, &cap);
    if (cap.op == TM_OP_DIFF_TILE_STATS) index = k;
  }
  EXPECT_LT(index, cpu->kernel_count()) << "the CPU backend declares no diff.tile_stats kernel";
  tm_kernel_call_v1 call{};
  call.struct_size = sizeof call;
  call.op = TM_OP_DIFF_TILE_STATS;
  call.kernel_index = index;
  call.dtype = TM_DTYPE_F64;
  call.input = a.data();
  call.element_count = elements;
  tm_diff_tile_params_v1 params = p;
  params.b = b.data();
  call.params = &params;
  call.params_size = sizeof params;
  call.output = out.data();
  call.output_size = out.size() * sizeof(tm_diff_tile_v1);
  call.threads = threads;
  const tm_status st = cpu->run(&call, &msg);
  if (message) *message = msg.text;
  return st;
}

// The contract, pair by pair.
unsigned bucket(double d) {
  const int e = static_cast<int>((std::bit_cast<uint64_t>(d) >> 52) & 0x7FF) - 1023;
  if (std::fabs(d) < std::ldexp(1.0, -63)) return d < 0 ? 127 : 128;
  const int k = std::min(e, 63);
  return static_cast<unsigned>(d < 0 ? 63 - k : 192 + k);
}

void neumaier(double& s, double& c, double x) {
  const double t = s + x;
  c += std::fabs(s) >= std::fabs(x) ? (s - t) + x : (x - t) + s;
  s = t;
}

void reference_segment(tm_diff_tile_v1& t, const double* a, const double* b, uint64_t n) {
  bool finite = true;
  for (uint64_t i = 0; i < n; ++i) finite = finite && std::isfinite(a[i]) && std::isfinite(b[i]);
  double s[5][8] = {}, c[5][8] = {};
  t.count += n;
  for (uint64_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    if (!std::isfinite(x) || !std::isfinite(y)) {
      ++t.nonfinite;
      if (!(x == y || (std::isnan(x) && std::isnan(y)))) ++t.changed;
      continue;
    }
    const double d = y - x;
    if (d != 0) ++t.changed;
    ++t.buckets[bucket(d)];
    t.max_abs = std::max(t.max_abs, std::fabs(d));
    t.min_delta = std::min(t.min_delta, d);
    t.max_delta = std::max(t.max_delta, d);
    const double terms[5] = {d, d * d, x * x, y * y, x * y};
    for (int k = 0; k < 5; ++k) {
      if (!finite) {
        neumaier(t.sum[k], t.compensation[k], terms[k]);
        continue;
      }
      double& ls = s[k][i % 8];
      double& lc = c[k][i % 8];
      const double tt = ls + terms[k], e = tt - ls;
      lc += (ls - (tt - e)) + (terms[k] - e);
      ls = tt;
    }
  }
  if (finite)
    for (int l = 0; l < 8; ++l)
      for (int k = 0; k < 5; ++k) {
        neumaier(t.sum[k], t.compensation[k], s[k][l]);
        t.compensation[k] += c[k][l];
      }
}

std::vector<tm_diff_tile_v1> reference(const std::vector<double>& a, const std::vector<double>& b, uint64_t rows, uint64_t cols,
                                       uint64_t tile_cols) {
  std::vector<tm_diff_tile_v1> out((cols + tile_cols - 1) / tile_cols, tm_diff_tile_empty());
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t t = 0; t < out.size(); ++t) {
      const uint64_t c0 = t * tile_cols, n = std::min(cols, c0 + tile_cols) - c0;
      reference_segment(out[t], a.data() + r * cols + c0, b.data() + r * cols + c0, n);
    }
  return out;
}

void expect_same(const std::vector<tm_diff_tile_v1>& got, const std::vector<tm_diff_tile_v1>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t t = 0; t < got.size(); ++t)
    EXPECT_EQ(std::memcmp(&got[t], &want[t], sizeof got[t]), 0)
        << what << ", tile " << t << ": count " << got[t].count << "/" << want[t].count << ", changed " << got[t].changed << "/"
        << want[t].changed << ", Σ Δ² " << got[t].sum[1] << "+" << got[t].compensation[1] << " / " << want[t].sum[1] << "+"
        << want[t].compensation[1];
}

struct Pairs {
  std::vector<double> a, b;
};

// Weights-like values (bf16-rounded normals) and B with some pairs changed by small and large amounts, some equal
// with opposite zero signs, and (when asked) a NaN and infinities in a few places.
Pairs make_pairs(uint64_t n, uint32_t seed, bool nonfinite) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0, 0.02);
  Pairs p{std::vector<double>(n), std::vector<double>(n)};
  for (uint64_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(normal(rng));
    p.a[i] = std::bit_cast<float>(std::bit_cast<uint32_t>(f) & 0xFFFF0000u);
    const uint64_t k = rng() % 10;
    p.b[i] = k < 6 ? p.a[i] : k < 8 ? p.a[i] + normal(rng) * 1e-3 : k == 8 ? -p.a[i] * 1e7 : (p.a[i] == 0 ? -0.0 : p.a[i]);
  }
  if (nonfinite && n > 5) {
    p.a[n / 3] = std::numeric_limits<double>::quiet_NaN();
    p.b[n / 3] = std::numeric_limits<double>::quiet_NaN();
    p.b[n / 2] = std::numeric_limits<double>::infinity();
    p.a[n - 2] = -std::numeric_limits<double>::infinity();
    p.b[n - 2] = -std::numeric_limits<double>::infinity();
  }
  return p;
}

TEST(DiffTilesKernel, EveryTileEqualsTheContractBitForBit) {
  for (const bool nonfinite : {false, true})
    for (const uint64_t cols : {1u, 5u, 7u, 8u, 9u, 15u, 16u, 17u, 31u, 33u, 255u, 256u, 300u, 1000u})
      for (const uint64_t tile_cols : {7u, 8u, 64u, 256u}) {
        const uint64_t rows = 3;
        const Pairs p = make_pairs(rows * cols, static_cast<uint32_t>(cols * 31 + tile_cols), nonfinite);
        std::vector<tm_diff_tile_v1> got((cols + tile_cols - 1) / tile_cols, tm_diff_tile_empty());
        std::string message;
        ASSERT_EQ(run_cpu(p.a, p.b, rows * cols, {nullptr, rows, cols, tile_cols}, got, 1, &message), TM_OK) << message;
        expect_same(got, reference(p.a, p.b, rows, cols, tile_cols),
                    "cols " + std::to_string(cols) + ", tile_cols " + std::to_string(tile_cols) + (nonfinite ? ", non-finite" : ""));
      }
}

TEST(DiffTilesKernel, RowsInOneCallOrOnePerCallAndThreadsGiveTheSameTiles) {
  const uint64_t rows = 40, cols = 4096 + 100, tile_cols = 256;
  const Pairs p = make_pairs(rows * cols, 7, false);
  std::vector<tm_diff_tile_v1> whole((cols + tile_cols - 1) / tile_cols, tm_diff_tile_empty()), by_row = whole, threaded = whole;
  ASSERT_EQ(run_cpu(p.a, p.b, rows * cols, {nullptr, rows, cols, tile_cols}, whole), TM_OK);
  ASSERT_EQ(run_cpu(p.a, p.b, rows * cols, {nullptr, rows, cols, tile_cols}, threaded, 2), TM_OK);
  for (uint64_t r = 0; r < rows; ++r) {
    const std::vector<double> a(p.a.begin() + r * cols, p.a.begin() + (r + 1) * cols), b(p.b.begin() + r * cols, p.b.begin() + (r + 1) * cols);
    ASSERT_EQ(run_cpu(a, b, cols, {nullptr, 1, cols, tile_cols}, by_row), TM_OK);
  }
  expect_same(by_row, whole, "one row per call");
  expect_same(threaded, whole, "two threads");
  expect_same(whole, reference(p.a, p.b, rows, cols, tile_cols), "the contract");
  uint64_t changed = 0, in_buckets = 0;
  for (const auto& t : whole) {
    changed += t.changed;
    for (uint64_t c : t.buckets) in_buckets += c;
  }
  uint64_t expected_changed = 0;
  for (uint64_t i = 0; i < p.a.size(); ++i) expected_changed += p.a[i] != p.b[i];
  EXPECT_EQ(changed, expected_changed);
  EXPECT_EQ(in_buckets, rows * cols);
}

TEST(DiffTilesKernel, MalformedCallsAreRefusedWithTheReason) {
  const std::vector<double> a(100, 1.0), b(100, 2.0);
  std::vector<tm_diff_tile_v1> out(4, tm_diff_tile_empty());
  struct Case {
    tm_diff_tile_params_v1 p;
    uint64_t elements;
    size_t out_tiles;
    const char* says;
  };
  const Case cases[] = {
      {{nullptr, 0, 100, 32}, 100, 4, "at least 1"},
      {{nullptr, 1, 100, 0}, 100, 4, "at least 1"},
      {{nullptr, 2, 100, 32}, 100, 4, "not rows x cols"},
      {{nullptr, 1, 100, 32}, 100, 3, "output holds 3 tiles; the call has 4"},
  };
  for (const Case& c : cases) {
    std::vector<tm_diff_tile_v1> o(c.out_tiles, tm_diff_tile_empty());
    std::string message;
    EXPECT_EQ(run_cpu(a, b, c.elements, c.p, o, 1, &message), TM_ERR_INVALID_ARGUMENT) << c.says;
    EXPECT_NE(message.find("diff.tile_stats: "), std::string::npos) << message;
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace tmorph
