// The CPU TM_OP_DEQUANTIZE_PACKED kernel (backends/cpu/packed_kernel.cpp) on random parts, on every SIMD
// target compiled in and supported here (HWY_SCALAR included), against the contract's formulas evaluated
// element by element: the bits must be equal.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/packed_kernel.h"
#include "simd_targets.h"
#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {
namespace {

using Params = tm_dequantize_packed_params_v1;

using test::for_each_simd_target;

// One expected value: the product of the contract's two operands.
struct Product {
  float a, b;
};

// A random scale: mostly normal floats over a wide exponent range (some products overflow or round to
// subnormals), and about 2% each of ±0, ±Inf, NaN (quiet or signalling, random payload) and subnormals.
float random_scale(std::mt19937_64& rng) {
  const uint32_t pick = rng() % 100;
  const uint32_t sign = (rng() & 1) ? 0x80000000u : 0u;
  if (pick < 2) return std::bit_cast<float>(sign);
  if (pick < 4) return std::bit_cast<float>(sign | 0x7f800000u);
  if (pick < 6) return std::bit_cast<float>(sign | 0x7f800000u | (static_cast<uint32_t>(rng() % 0x7fffff) + 1));
  if (pick < 8) return std::bit_cast<float>(sign | static_cast<uint32_t>(rng() % 0x7fffff + 1));
  const int exponent = pick < 12 ? static_cast<int>(rng() % 254) - 126 : static_cast<int>(rng() % 24) - 12;
  return std::bit_cast<float>(sign | (static_cast<uint32_t>(exponent + 127) << 23) | static_cast<uint32_t>(rng() & 0x7fffff));
}

std::vector<float> random_scales(std::mt19937_64& rng, size_t n) {
  std::vector<float> v(n);
  for (auto& s : v) s = random_scale(rng);
  return v;
}

std::vector<uint8_t> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

uint32_t word(const std::vector<uint8_t>& bytes, uint64_t index) {
  uint32_t w;
  std::memcpy(&w, bytes.data() + 4 * index, 4);
  return w;
}

// The operands of logical element (r, c), from the contract's formulas.
Product fp8_product(const Params& p, const std::vector<uint8_t>& codes, uint64_t r, uint64_t c) {
  const uint8_t code = codes[r * p.cols + c];
  const double v = p.code_dtype == TM_DTYPE_F8_E5M2 ? f8_e5m2_to_double(code) : f8_e4m3fn_to_double(code);
  const uint64_t grid_cols = (p.cols + p.block_cols - 1) / p.block_cols;
  return {static_cast<float>(v), p.scales[(r / p.block_rows) * grid_cols + c / p.block_cols]};
}

Product mxfp4_product(const Params& p, const std::vector<uint8_t>& codes, uint64_t r, uint64_t c) {
  static constexpr float kE2M1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const uint8_t byte = codes[r * (p.cols / 2) + c / 2];
  const int code = c % 2 ? byte >> 4 : byte & 0x0f;
  const float v = code & 8 ? -kE2M1[code & 7] : kE2M1[code & 7];
  const uint8_t e = p.exponents[r * (p.cols / 32) + c / 32];
  return {v, e == 255 ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, e - 127)};
}

Product bnb4_product(const Params& p, const std::vector<uint8_t>& codes, uint64_t r, uint64_t c) {
  const uint64_t e = r * p.cols + c;
  const uint8_t byte = codes[e / 2];
  return {p.code_values[e % 2 ? byte & 0x0f : byte >> 4], p.scales[e / p.block_cols]};
}

Product gptq_product(const Params& p, const std::vector<uint8_t>& codes, const std::vector<uint8_t>& zeros, uint64_t r,
                     uint64_t c) {
  const auto g = static_cast<uint64_t>(p.group_index[c]);
  if (p.bits == 3) {  // the contract's field reader (op_contracts.h): codes cross words
    const auto* qw = reinterpret_cast<const int32_t*>(codes.data());
    const auto* zw = reinterpret_cast<const int32_t*>(zeros.data());
    const auto q = static_cast<int32_t>(tm_gptq_field(qw + r, p.rows, c, 3));
    const auto z = static_cast<int32_t>(tm_gptq_field(zw + g * (p.rows * 3 / 32), 1, r, 3));
    return {p.scales[g * p.rows + r], static_cast<float>(q - (z + p.zero_offset))};
  }
  const uint32_t per_word = 32 / p.bits, mask = (1u << p.bits) - 1;
  const auto q = static_cast<int32_t>((word(codes, c / per_word * p.rows + r) >> (c % per_word * p.bits)) & mask);
  const auto z = static_cast<int32_t>((word(zeros, g * (p.rows / per_word) + r / per_word) >> (r % per_word * p.bits)) & mask);
  return {p.scales[g * p.rows + r], static_cast<float>(q - (z + p.zero_offset))};
}

Product awq_product(const Params& p, const std::vector<uint8_t>& codes, const std::vector<uint8_t>& zeros, uint64_t r,
                    uint64_t c) {
  static constexpr int kNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // output r % 8 -> nibble (inverse of 0,2,4,6,1,3,5,7)
  const uint64_t words = p.rows / 8, g = c / p.block_cols;
  const int shift = 4 * kNibble[r % 8];
  const auto q = static_cast<int32_t>((word(codes, c * words + r / 8) >> shift) & 0xf);
  const auto z = static_cast<int32_t>((word(zeros, g * words + r / 8) >> shift) & 0xf);
  return {p.scales[g * p.rows + r], static_cast<float>(q - z)};
}

// Decodes rows [first, first + count) of p with `threads` threads on every SIMD target and compares each
// value with product(r, c).a * product(r, c).b bit for bit (any NaN where both operands are NaN: which
// payload survives is the compiler's choice).
template <class ProductFn>
void expect_exact(const std::string& what, Params p, const std::vector<uint8_t>& codes, uint64_t first, uint64_t count,
                  unsigned threads, ProductFn product) {
  p.row_first = first;
  std::vector<float> want(count * p.cols);
  std::vector<uint8_t> any_nan(want.size());
  for (uint64_t r = 0; r < count; ++r)
    for (uint64_t c = 0; c < p.cols; ++c) {
      const Product x = product(p, r + first, c);
      want[r * p.cols + c] = x.a * x.b;
      any_nan[r * p.cols + c] = std::isnan(x.a) && std::isnan(x.b);
    }
  for_each_simd_target([&](const std::string& target, bool) {
    std::vector<float> got(want.size() + 1, 12345.0f);
    tm_kernel_call_v1 call{};
    call.struct_size = sizeof call;
    call.op = TM_OP_DEQUANTIZE_PACKED;
    call.dtype = TM_DTYPE_F32;
    call.input = codes.data();
    call.element_count = want.size();
    call.params = &p;
    call.params_size = sizeof p;
    call.output = got.data();
    call.output_size = want.size() * sizeof(float);
    call.threads = threads;
    std::string error;
    ASSERT_EQ(run_dequantize_packed(call, &error), TM_OK) << what << ": " << error;
    EXPECT_EQ(got.back(), 12345.0f) << what << " on " << target << " wrote past its output";
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (any_nan[i] ? std::isnan(got[i]) : std::bit_cast<uint32_t>(got[i]) == std::bit_cast<uint32_t>(want[i])) continue;
      if (++differ <= 3)
        ADD_FAILURE() << what << " on " << target << ": row " << first + i / p.cols << " col " << i % p.cols << " gives "
                      << std::hexfloat << got[i] << ", want " << want[i];
    }
    EXPECT_EQ(differ, 0u) << what << " on " << target;
  });
}

// The row ranges and thread counts every case is decoded with: everything, then pieces that start and end
// inside the matrix.
struct Piece {
  uint64_t first, count;
  unsigned threads;
};
std::vector<Piece> pieces_of(uint64_t rows, uint64_t step) {
  std::vector<Piece> v{{0, rows, 1}, {0, rows, 3}};
  if (rows > 2 * step) v.push_back({step, rows - 2 * step, 2});
  if (rows > step) v.push_back({rows - step, step, 1});
  return v;
}

Params base(uint32_t scheme, uint64_t rows, uint64_t cols) {
  Params p{};
  p.scheme = scheme;
  p.rows = rows;
  p.cols = cols;
  return p;
}

TEST(PackedKernel, SimdTargetsCompared) {
  std::string names;
  for_each_simd_target([&](const std::string& target, bool) { names += " " + target; });
  std::printf("[ packed   ] SIMD targets compared:%s\n", names.c_str());
  EXPECT_FALSE(names.empty());
}

TEST(PackedKernel, Fp8EveryCodeGivesItsFormatsValue) {
  for (const uint32_t dtype : {uint32_t{TM_DTYPE_F8_E4M3FN}, uint32_t{TM_DTYPE_F8_E5M2}}) {
    Params p = base(TM_PACKED_FP8, 4, 256);
    p.code_dtype = dtype;
    p.block_rows = 4;
    p.block_cols = 256;
    const std::vector<float> scales{1.0f};
    p.scales = scales.data();
    std::vector<uint8_t> codes(4 * 256);
    for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>(i);  // every code, at every offset mod 4
    for (size_t i = 256; i < codes.size(); ++i) codes[i] = static_cast<uint8_t>((i * 7 + i / 256) & 0xff);
    expect_exact("fp8 dtype " + std::to_string(dtype) + " codes", p, codes, 0, 4, 1,
                 [&](const Params& q, uint64_t r, uint64_t c) { return fp8_product(q, codes, r, c); });
  }
}

TEST(PackedKernel, Fp8ScaleGrids) {
  std::mt19937_64 rng(1);
  struct Shape {
    uint64_t rows, cols, block_rows, block_cols;
  };
  for (const uint32_t dtype : {uint32_t{TM_DTYPE_F8_E4M3FN}, uint32_t{TM_DTYPE_F8_E5M2}}) {
    for (const Shape s : {Shape{37, 203, 5, 7}, Shape{64, 256, 128, 128}, Shape{33, 1000, 1, 1000}, Shape{20, 515, 20, 515},
                          Shape{9, 61, 2, 3}, Shape{16, 67, 16, 1}, Shape{300, 300, 128, 128}}) {
      Params p = base(TM_PACKED_FP8, s.rows, s.cols);
      p.code_dtype = dtype;
      p.block_rows = s.block_rows;
      p.block_cols = s.block_cols;
      const auto scales = random_scales(rng, ((s.rows + s.block_rows - 1) / s.block_rows) * ((s.cols + s.block_cols - 1) / s.block_cols));
      p.scales = scales.data();
      const auto codes = random_bytes(rng, s.rows * s.cols);
      const std::string what = "fp8 " + std::to_string(s.rows) + "x" + std::to_string(s.cols) + " blocks " +
                               std::to_string(s.block_rows) + "x" + std::to_string(s.block_cols);
      for (const Piece& piece : pieces_of(s.rows, 3))
        expect_exact(what, p, codes, piece.first, piece.count, piece.threads,
                     [&](const Params& q, uint64_t r, uint64_t c) { return fp8_product(q, codes, r, c); });
    }
  }
}

TEST(PackedKernel, Mxfp4) {
  std::mt19937_64 rng(2);
  for (const uint64_t cols : {32u, 96u, 256u, 2048u}) {
    const uint64_t rows = cols == 2048 ? 70 : 13;
    Params p = base(TM_PACKED_MXFP4, rows, cols);
    auto exponents = random_bytes(rng, rows * cols / 32);
    for (size_t i = 0; i < exponents.size(); ++i) {  // mostly near 2^0, and the extremes
      const uint32_t pick = rng() % 10;
      exponents[i] = pick == 0 ? exponents[i] : pick == 1 ? static_cast<uint8_t>(rng() % 2 ? 0 : 255)
                                                          : static_cast<uint8_t>(117 + rng() % 20);
    }
    p.exponents = exponents.data();
    const auto codes = random_bytes(rng, rows * cols / 2);
    for (const Piece& piece : pieces_of(rows, 2))
      expect_exact("mxfp4 " + std::to_string(rows) + "x" + std::to_string(cols), p, codes, piece.first, piece.count, piece.threads,
                   [&](const Params& q, uint64_t r, uint64_t c) { return mxfp4_product(q, codes, r, c); });
  }
}

TEST(PackedKernel, Bnb4) {
  std::mt19937_64 rng(3);
  // NF4's quant_map, and a table of arbitrary values with the specials.
  const std::vector<float> nf4{-1.0f, -0.6961928f, -0.52507305f, -0.39491749f, -0.28444138f, -0.18477343f, -0.09105004f, 0.0f,
                               0.0795803f, 0.1609302f, 0.2461123f, 0.33791524f, 0.44070983f, 0.562617f, 0.72295684f, 1.0f};
  std::vector<float> odd = random_scales(rng, 16);
  odd[3] = std::numeric_limits<float>::quiet_NaN();
  odd[5] = -std::numeric_limits<float>::infinity();
  odd[9] = -0.0f;
  struct Shape {
    uint64_t rows, cols, block;
  };
  for (const std::vector<float>* table : std::vector<const std::vector<float>*>{&nf4, &odd}) {
    for (const Shape s : {Shape{7, 33, 64}, Shape{11, 101, 7}, Shape{5, 640, 64}, Shape{9, 31, 1}, Shape{3, 129, 4096},
                          Shape{8, 64, 32}, Shape{130, 1001, 64}, Shape{1, 63, 64}}) {
      Params p = base(TM_PACKED_BNB4, s.rows, s.cols);
      p.block_cols = s.block;
      p.code_values = table->data();
      const auto scales = random_scales(rng, (s.rows * s.cols + s.block - 1) / s.block);
      p.scales = scales.data();
      const auto codes = random_bytes(rng, (s.rows * s.cols + 1) / 2);
      const std::string what = "bnb4 " + std::to_string(s.rows) + "x" + std::to_string(s.cols) + " block " + std::to_string(s.block);
      for (const Piece& piece : pieces_of(s.rows, 1))
        expect_exact(what, p, codes, piece.first, piece.count, piece.threads,
                     [&](const Params& q, uint64_t r, uint64_t c) { return bnb4_product(q, codes, r, c); });
    }
  }
}

TEST(PackedKernel, Gptq) {
  std::mt19937_64 rng(4);
  struct Shape {
    uint32_t bits;
    uint64_t rows, cols, group_size;  // group_size 0: act-order (random g_idx over cols / 32 groups)
    int32_t zero_offset;
  };
  for (const Shape s : {Shape{4, 48, 96, 32, 1}, Shape{4, 40, 40, 8, 0}, Shape{4, 24, 160, 40, 1}, Shape{4, 64, 128, 0, 1},
                        Shape{2, 48, 96, 32, 1}, Shape{2, 32, 48, 16, 0}, Shape{2, 16, 80, 0, 0}, Shape{8, 36, 36, 12, 1},
                        Shape{8, 20, 100, 0, 0}, Shape{8, 8, 64, 64, 1}, Shape{4, 256, 512, 128, 1}, Shape{4, 512, 384, 0, 1},
                        Shape{2, 32, 800, 0, 0}, Shape{8, 136, 160, 32, 1}, Shape{2, 144, 544, 32, 1},
                        // 3 bits: one triple, several, several chunks of 1,024 columns and tiles of 128 rows, act-order
                        Shape{3, 32, 32, 32, 1}, Shape{3, 64, 96, 32, 0}, Shape{3, 160, 2112, 128, 1}, Shape{3, 32, 1088, 0, 1},
                        Shape{3, 288, 64, 16, 0}}) {
    Params p = base(TM_PACKED_GPTQ, s.rows, s.cols);
    p.bits = s.bits;
    p.zero_offset = s.zero_offset;
    // Bytes of qweight and of one group's zeros: 3-bit codes take 3 words per 32.
    const uint64_t code_bytes = s.bits == 3 ? s.cols / 32 * 3 * s.rows * 4 : s.cols / (32 / s.bits) * s.rows * 4;
    const uint64_t zero_bytes = s.bits == 3 ? s.rows / 32 * 3 * 4 : s.rows / (32 / s.bits) * 4;
    std::vector<int32_t> group_index(s.cols);
    const uint64_t groups = s.group_size ? (s.cols + s.group_size - 1) / s.group_size : std::max<uint64_t>(2, s.cols / 32);
    for (uint64_t i = 0; i < s.cols; ++i)
      group_index[i] = static_cast<int32_t>(s.group_size ? i / s.group_size : rng() % groups);
    p.groups = groups;
    p.group_index = group_index.data();
    const auto scales = random_scales(rng, groups * s.rows);
    p.scales = scales.data();
    const auto zeros = random_bytes(rng, groups * zero_bytes);
    std::vector<int32_t> zero_words(zeros.size() / 4);
    std::memcpy(zero_words.data(), zeros.data(), zeros.size());
    p.zeros = zero_words.data();
    const auto codes = random_bytes(rng, code_bytes);
    const std::string what = "gptq " + std::to_string(s.bits) + "-bit " + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                             " group " + std::to_string(s.group_size) + " offset " + std::to_string(s.zero_offset);
    for (const Piece& piece : pieces_of(s.rows, 5))
      expect_exact(what, p, codes, piece.first, piece.count, piece.threads,
                   [&](const Params& q, uint64_t r, uint64_t c) { return gptq_product(q, codes, zeros, r, c); });
  }
}

TEST(PackedKernel, Awq) {
  std::mt19937_64 rng(5);
  struct Shape {
    uint64_t rows, cols, group_size;
  };
  for (const Shape s : {Shape{24, 40, 32}, Shape{64, 100, 24}, Shape{8, 257, 7}, Shape{16, 64, 128}, Shape{136, 300, 64},
                        Shape{256, 520, 128}, Shape{264, 150, 32}}) {
    Params p = base(TM_PACKED_AWQ, s.rows, s.cols);
    p.bits = 4;
    p.block_cols = s.group_size;
    const uint64_t groups = (s.cols + s.group_size - 1) / s.group_size;
    p.groups = groups;
    const auto scales = random_scales(rng, groups * s.rows);
    p.scales = scales.data();
    const auto zeros = random_bytes(rng, groups * s.rows / 8 * 4);
    std::vector<int32_t> zero_words(zeros.size() / 4);
    std::memcpy(zero_words.data(), zeros.data(), zeros.size());
    p.zeros = zero_words.data();
    const auto codes = random_bytes(rng, s.cols * s.rows / 8 * 4);
    const std::string what = "awq " + std::to_string(s.rows) + "x" + std::to_string(s.cols) + " group " + std::to_string(s.group_size);
    auto pieces = pieces_of(s.rows, 8);
    pieces.push_back({3, s.rows - 3, 1});  // rows that start and end inside words
    pieces.push_back({1, 1, 1});
    for (const Piece& piece : pieces)
      expect_exact(what, p, codes, piece.first, piece.count, piece.threads,
                   [&](const Params& q, uint64_t r, uint64_t c) { return awq_product(q, codes, zeros, r, c); });
  }
}

// Parts need not be 4-byte aligned in their file: the int32 words are read byte-wise.
TEST(PackedKernel, UnalignedWordParts) {
  std::mt19937_64 rng(6);
  Params p = base(TM_PACKED_GPTQ, 32, 64);
  p.bits = 4;
  p.zero_offset = 1;
  std::vector<int32_t> group_index(64);
  for (int i = 0; i < 64; ++i) group_index[i] = i / 32;
  p.groups = 2;
  p.group_index = group_index.data();
  const auto scales = random_scales(rng, 2 * 32);
  p.scales = scales.data();
  const auto zeros = random_bytes(rng, 2 * 32 / 8 * 4);
  std::vector<int32_t> zero_words(zeros.size() / 4);
  std::memcpy(zero_words.data(), zeros.data(), zeros.size());
  p.zeros = zero_words.data();
  const auto codes = random_bytes(rng, 64 / 8 * 32 * 4);
  std::vector<uint8_t> shifted(codes.size() + 1);
  std::memcpy(shifted.data() + 1, codes.data(), codes.size());
  // The kernel reads the codes from shifted + 1; the reference from codes.
  std::vector<float> got(32 * 64), want(32 * 64);
  for (auto [input, out] : {std::pair<const uint8_t*, std::vector<float>*>{codes.data(), &want},
                            std::pair<const uint8_t*, std::vector<float>*>{shifted.data() + 1, &got}}) {
    tm_kernel_call_v1 call{};
    call.struct_size = sizeof call;
    call.op = TM_OP_DEQUANTIZE_PACKED;
    call.dtype = TM_DTYPE_F32;
    call.input = input;
    call.element_count = out->size();
    call.params = &p;
    call.params_size = sizeof p;
    call.output = out->data();
    call.output_size = out->size() * sizeof(float);
    call.threads = 1;
    std::string error;
    ASSERT_EQ(run_dequantize_packed(call, &error), TM_OK) << error;
  }
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace tmorph::cpu
