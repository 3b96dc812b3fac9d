// ggml block dequantization (backends/cpu/dequant): the format table against the GGUF reader's table,
// hand-made blocks with known values, the integrity of the lookup grids, and every quantized tensor of the
// reference fixtures (gguf-py's values, checked against ggml's C code) compared bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <hwy/targets.h>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "cpu/dequant/ggml_dequant.h"
#include "formats/gguf.h"
#include "simd_targets.h"
#include "tensormorph/dtype.h"

namespace tmorph::cpu {
namespace {

const std::string kFixtures = TM_FIXTURES_DIR;

uint32_t f32_bits(float f) { return std::bit_cast<uint32_t>(f); }

const GgmlBlockFormat& format_of(uint32_t id) {
  const GgmlBlockFormat* f = ggml_block_format(id);
  if (!f) throw std::runtime_error("no format for ggml type " + std::to_string(id));
  return *f;
}

// Decodes whole blocks from `bytes` (which must hold a whole number of blocks).
std::vector<float> decode(uint32_t id, const std::vector<uint8_t>& bytes) {
  const GgmlBlockFormat& f = format_of(id);
  const uint64_t blocks = bytes.size() / f.block_bytes;
  std::vector<float> out(blocks * f.block_elements);
  dequantize_ggml_blocks(f, bytes.data(), blocks, out.data());
  return out;
}

void put_u16(std::vector<uint8_t>& b, size_t at, uint16_t v) { std::memcpy(b.data() + at, &v, sizeof v); }

// The SIMD target that dispatch picks on this machine (the best one compiled in and supported).
std::string default_target() { return hwy::TargetName(hwy::SupportedAndGeneratedTargets().front()); }

using test::for_each_simd_target;

// ---------------------------------------------------------------------------------------------------
// The table

TEST(DequantFormats, EveryFormatMatchesTheGgufReadersBlockGeometry) {
  int count = 0;
  for (uint32_t id = 0; id < 256; ++id) {
    const GgmlBlockFormat* f = ggml_block_format(id);
    const GgmlType* t = ggml_type(id);
    if (!f) {
      // Only dense types (and ids the reader does not know) lack a dequantizer.
      if (t) {
        EXPECT_TRUE(t->dense.has_value()) << "quantized GGUF type " << t->name << " has no dequantizer";
      }
      continue;
    }
    ++count;
    ASSERT_NE(t, nullptr) << f->name << " is not a type the GGUF reader knows";
    EXPECT_EQ(f->type_id, id);
    EXPECT_STREQ(f->name, t->name);
    EXPECT_EQ(f->block_elements, t->block_size) << f->name;
    EXPECT_EQ(f->block_bytes, t->type_size) << f->name;
    EXPECT_FALSE(t->dense.has_value()) << f->name;
  }
  EXPECT_EQ(count, 24);
}

TEST(DequantFormats, AFormatThatIsNotOursFillsNaN) {
  const GgmlBlockFormat bogus{1000, "BOGUS", 4, 4};
  std::vector<uint8_t> src(8, 0);
  std::vector<float> out(8, 1.0f);
  dequantize_ggml_blocks(bogus, src.data(), 2, out.data());
  for (float v : out) EXPECT_TRUE(std::isnan(v));
}

// ---------------------------------------------------------------------------------------------------
// Scalars

TEST(DequantBlocks, Fp16WidensExactly) {
  using ggml_detail::fp16_to_f32;
  EXPECT_EQ(fp16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_f32(0x3800), 0.5f);
  EXPECT_EQ(fp16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(fp16_to_f32(0x0400), 0x1p-14f);         // smallest normal
  EXPECT_EQ(fp16_to_f32(0x0001), 0x1p-24f);         // smallest subnormal
  EXPECT_EQ(fp16_to_f32(0x83ff), -1023 * 0x1p-24f);  // largest subnormal, negative
  EXPECT_EQ(f32_bits(fp16_to_f32(0x8000)), 0x80000000u);
  EXPECT_EQ(f32_bits(fp16_to_f32(0x0000)), 0u);
  EXPECT_EQ(fp16_to_f32(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_f32(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(f32_bits(fp16_to_f32(0x7e01)), 0x7fc02000u);  // NaN payload kept
  // Every finite half agrees with the GGUF reader's own converter (f16_to_double).
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_f32(static_cast<uint16_t>(h));
    if ((h & 0x7c00u) == 0x7c00u) continue;
    ASSERT_EQ(static_cast<double>(f), f16_to_double(static_cast<uint16_t>(h))) << std::hex << h;
  }
}

TEST(DequantBlocks, E8m0IsHalfTheMxScale) {
  using ggml_detail::e8m0_half_to_f32;
  EXPECT_EQ(e8m0_half_to_f32(128), 1.0f);
  EXPECT_EQ(e8m0_half_to_f32(127), 0.5f);
  EXPECT_EQ(e8m0_half_to_f32(2), 0x1p-126f);
  EXPECT_EQ(e8m0_half_to_f32(1), 0x1p-127f);  // float subnormals
  EXPECT_EQ(e8m0_half_to_f32(0), 0x1p-128f);
  EXPECT_EQ(e8m0_half_to_f32(255), 0x1p127f);
}

// ---------------------------------------------------------------------------------------------------
// Hand-made blocks

TEST(DequantBlocks, Q4_0KnownNibbles) {
  std::vector<uint8_t> b(18);
  put_u16(b, 0, 0x3800);  // d = 0.5
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(2, b);
  ASSERT_EQ(y.size(), 32u);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;             // low nibble j
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.5f) << j;   // high nibble 15 - j
  }
}

TEST(DequantBlocks, Q4_1AddsTheMin) {
  std::vector<uint8_t> b(20);
  put_u16(b, 0, 0x3400);  // d = 0.25
  put_u16(b, 2, 0xc000);  // m = -2
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | (j << 4));
  const auto y = decode(3, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.25f - 2.0f);
    EXPECT_EQ(y[j + 16], j * 0.25f - 2.0f);
  }
}

TEST(DequantBlocks, Q5_0TakesTheFifthBitFromTheMask) {
  std::vector<uint8_t> b(22);
  put_u16(b, 0, 0x3c00);  // d = 1
  const uint32_t qh = 0x80000001u;  // elements 0 and 31 have the 5th bit
  std::memcpy(b.data() + 2, &qh, 4);
  for (int j = 0; j < 16; ++j) b[6 + j] = 0xff;
  const auto y = decode(6, b);
  EXPECT_EQ(y[0], 15.0f);   // 31 - 16
  EXPECT_EQ(y[1], -1.0f);   // 15 - 16
  EXPECT_EQ(y[16], -1.0f);
  EXPECT_EQ(y[31], 15.0f);
}

TEST(DequantBlocks, Q8_0SignedBytes) {
  std::vector<uint8_t> b(34);
  put_u16(b, 0, 0x3400);  // d = 0.25
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(4 * j - 128));
  const auto y = decode(8, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (4 * j - 128) * 0.25f) << j;
}

// Neither Q8_1 nor Q8_K is in the fixtures (gguf-py has no dequantizer for them).
TEST(DequantBlocks, Q8_1IgnoresItsSumField) {
  std::vector<uint8_t> b(36);
  put_u16(b, 0, 0x3c00);  // d = 1
  put_u16(b, 2, 0x7c00);  // s = inf: not used
  for (int j = 0; j < 32; ++j) b[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  const auto y = decode(9, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], static_cast<float>(j - 16)) << j;
}

TEST(DequantBlocks, Q8_KFloat32Scale) {
  std::vector<uint8_t> b(292, 0);
  const float d = 0.1f;  // not an fp16 value: Q8_K's scale is a float32
  std::memcpy(b.data(), &d, 4);
  for (int j = 0; j < 256; ++j) b[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 128));
  const auto y = decode(15, b);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(y[j], d * static_cast<float>(j - 128)) << j;
}

TEST(DequantBlocks, Mxfp4E2m1CodesTimesTheExponent) {
  std::vector<uint8_t> b(17 * 2);
  b[0] = 128;  // OCP scale 2^(128-127) = 2; ggml multiplies the doubled E2M1 codes by half of it, 1
  for (int j = 0; j < 16; ++j) b[1 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  b[17] = 0;  // 2^-127 OCP scale: products land in the float subnormals
  b[18] = 0x07;
  const auto y = decode(39, b);
  const float e2m1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], e2m1[j] * 2) << j;  // e2m1 * 2^(e-127)
    EXPECT_EQ(y[j + 16], e2m1[15 - j] * 2) << j;
  }
  EXPECT_EQ(y[32], 6 * 0x1p-127f);  // code 7 (6.0) times 2^(0-127): a float subnormal
  EXPECT_EQ(y[33], 0.0f);
  EXPECT_EQ(y[48], 0.0f);
}

TEST(DequantBlocks, Q4_KScalesMinsAndNibbles) {
  std::vector<uint8_t> b(144, 0);
  put_u16(b, 0, 0x3c00);  // d = 1
  put_u16(b, 2, 0x3800);  // dmin = 0.5
  // Sub-block 0: scale 3, min 5 (bytes 0 and 4); sub-block 5: scale 0x2a, min 0x31 (low bits in byte 9,
  // top bits in bytes 1 and 5).
  b[4 + 0] = 3;
  b[4 + 4] = 5;
  b[4 + 9] = 0x0a | (0x01 << 4);
  b[4 + 1] = 0x2 << 6;
  b[4 + 5] = 0x3 << 6;
  for (int l = 0; l < 32; ++l) b[16 + l] = static_cast<uint8_t>(l & 15);           // chunk 0 low nibbles
  for (int l = 0; l < 32; ++l) b[16 + 64 + l] = static_cast<uint8_t>((l & 15) << 4);  // chunk 2 high nibbles
  const auto y = decode(12, b);
  for (int l = 0; l < 32; ++l) EXPECT_EQ(y[l], 3.0f * (l & 15) - 2.5f) << l;
  for (int l = 0; l < 32; ++l) EXPECT_EQ(y[160 + l], 42.0f * (l & 15) - 24.5f) << l;
  EXPECT_EQ(y[32], 0.0f);  // sub-block 1: scale 0, min 0 (top bits of bytes 1 and 5 belong to sub-block 5)
}

TEST(DequantBlocks, Q6_KSixBitsAndSignedScales) {
  std::vector<uint8_t> b(210, 0);
  put_u16(b, 208, 0x3800);  // d = 0.5
  for (int s = 0; s < 16; ++s) b[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(s % 2 ? -(s + 1) : s + 1));
  // Element 0: q = 0x3f (low nibble 15 in ql[0], top bits 3 in qh[0] bits 0-1) -> 31.
  // Element 64 (half 0, k = 2): low nibble from the high nibble of ql[0]; top bits in qh[0] bits 4-5.
  b[0] = 0x0f | (0x2 << 4);
  b[128] = 0x3 | (0x1 << 4);
  const auto y = decode(14, b);
  EXPECT_EQ(y[0], 0.5f * 1.0f * 31.0f);         // scale[0] = 1
  EXPECT_EQ(y[64], 0.5f * 5.0f * (0x12 - 32));   // scale[4] = 5, q = 0x12
  EXPECT_EQ(y[16], 0.5f * -2.0f * -32.0f);       // scale[1] = -2, q = 0
}

TEST(DequantBlocks, Iq4NlLevels) {
  std::vector<uint8_t> b(18);
  put_u16(b, 0, 0x4000);  // d = 2
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode(20, b);
  const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 2.0f * levels[j]);
    EXPECT_EQ(y[j + 16], 2.0f * levels[15 - j]);
  }
}

TEST(DequantBlocks, UnalignedSourceAndPiecewiseDecodingAgree) {
  std::mt19937 rng(7);
  for (const uint32_t id : {2u, 8u, 12u, 14u, 16u, 19u, 29u, 39u}) {
    const GgmlBlockFormat& f = format_of(id);
    const uint64_t blocks = 5;
    std::vector<uint8_t> bytes(blocks * f.block_bytes + 3);
    for (auto& v : bytes) v = static_cast<uint8_t>(rng());
    std::vector<float> whole(blocks * f.block_elements), pieces(whole.size());
    dequantize_ggml_blocks(f, bytes.data() + 3, blocks, whole.data());
    for (uint64_t i = 0; i < blocks; ++i)
      dequantize_ggml_blocks(f, bytes.data() + 3 + i * f.block_bytes, 1, pieces.data() + i * f.block_elements);
    EXPECT_EQ(std::memcmp(whole.data(), pieces.data(), whole.size() * sizeof(float)), 0) << f.name;
  }
}

TEST(DequantBlocks, EverySimdTargetGivesTheSameBits) {
  std::string names;
  for_each_simd_target([&](const std::string& target, bool) { names += " " + target; });
  std::printf("[ dequant  ] SIMD targets compared:%s\n", names.c_str());
  std::mt19937 rng(11);
  // The formats with Highway decoders: Q4_0, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4, and the
  // lattice formats IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S, IQ3_S, IQ2_S, IQ1_M.
  for (const uint32_t id : {2u, 6u, 7u, 8u, 12u, 14u, 20u, 23u, 39u, 16u, 17u, 18u, 19u, 21u, 22u, 29u}) {
    const GgmlBlockFormat& f = format_of(id);
    const uint64_t blocks = 64;
    std::vector<uint8_t> bytes(blocks * f.block_bytes);
    for (auto& v : bytes) v = static_cast<uint8_t>(rng());
    std::vector<float> best(blocks * f.block_elements), other(best.size());
    dequantize_ggml_blocks(f, bytes.data(), blocks, best.data());
    for_each_simd_target([&](const std::string& target, bool) {
      std::fill(other.begin(), other.end(), 0.0f);
      dequantize_ggml_blocks(f, bytes.data(), blocks, other.data());
      // Bits equal, except that which NaN payload survives NaN + NaN (Q5_1 blocks whose d and m are both
      // NaN) is the compiler's choice, as in ggml's own C code.
      size_t differ = 0;
      for (size_t i = 0; i < best.size(); ++i)
        differ += !(std::isnan(best[i]) && std::isnan(other[i])) && std::memcmp(&best[i], &other[i], sizeof(float)) != 0;
      EXPECT_EQ(differ, 0u) << f.name << " on " << target;
    });
  }
}

// ---------------------------------------------------------------------------------------------------
// Grids (data taken over from ggml: see ggml_iq_grids.cpp)

// A grid point as ggml stores it: its elements as the bytes of a little-endian integer.
template <class Row>
uint64_t packed(const Row& row) {
  uint64_t v = 0;
  for (size_t j = 0; j < row.size(); ++j) v |= uint64_t{static_cast<uint8_t>(row[j])} << (8 * j);
  return v;
}

// ggml's grids are sorted: points ascend when compared from the last element to the first.
template <class G>
bool ascending(const G& grid) {
  for (size_t i = 1; i < grid.size(); ++i)
    if (!std::lexicographical_compare(grid[i - 1].rbegin(), grid[i - 1].rend(), grid[i].rbegin(), grid[i].rend()))
      return false;
  return true;
}

template <class G>
void fnv1a(uint64_t& h, const G& grid) {
  for (const auto& row : grid)
    for (auto v : row) h = (h ^ static_cast<uint8_t>(v)) * 0x100000001b3ull;
}

TEST(DequantGrids, EntryCountsOrderAndSpotValuesMatchGgml) {
  using namespace ggml_detail;
  static_assert(kIq2xxsGrid.size() == 256 && kIq2xsGrid.size() == 512 && kIq2sGrid.size() == 1024);
  static_assert(kIq3xxsGrid.size() == 256 && kIq3sGrid.size() == 512 && kIq1sGrid.size() == 2048);
  EXPECT_TRUE(ascending(kIq2xxsGrid));
  EXPECT_TRUE(ascending(kIq2xsGrid));
  EXPECT_TRUE(ascending(kIq2sGrid));
  EXPECT_TRUE(ascending(kIq3xxsGrid));
  EXPECT_TRUE(ascending(kIq3sGrid));
  EXPECT_TRUE(ascending(kIq1sGrid));
  // Values as printed in ggml-common.h (commit 01243c58).
  EXPECT_EQ(packed(kIq2xxsGrid[1]), 0x080808080808082bull);
  EXPECT_EQ(packed(kIq2xxsGrid[254]), 0x2b2b2b0819190808ull);
  EXPECT_EQ(packed(kIq2xxsGrid[255]), 0x2b2b2b1908081908ull);
  EXPECT_EQ(packed(kIq2xsGrid[510]), 0x2b2b2b2b2b190819ull);
  EXPECT_EQ(packed(kIq2sGrid[1022]), 0x2b2b2b2b2b082b08ull);
  EXPECT_EQ(packed(kIq2sGrid[1023]), 0x2b2b2b2b2b2b2b2bull);
  EXPECT_EQ(packed(kIq3xxsGrid[5]), 0x04040c3eull);
  EXPECT_EQ(packed(kIq3xxsGrid[255]), 0x3e341c04ull);
  EXPECT_EQ(packed(kIq3sGrid[7]), 0x01010305ull);
  EXPECT_EQ(packed(kIq3sGrid[511]), 0x0f0f0101ull);
  EXPECT_EQ(packed(kIq1sGrid[0]), 0xffffffffffffffffull);
  EXPECT_EQ(packed(kIq1sGrid[5]), 0xffffffffff00ff00ull);
  EXPECT_EQ(packed(kIq1sGrid[2047]), 0x0101010101010101ull);
  // ksigns_iq2xs, first and last row of ggml's table.
  const uint8_t first[16] = {0, 129, 130, 3, 132, 5, 6, 135, 136, 9, 10, 139, 12, 141, 142, 15};
  const uint8_t last[16] = {240, 113, 114, 243, 116, 245, 246, 119, 120, 249, 250, 123, 252, 125, 126, 255};
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(kIq2Signs[i], first[i]) << i;
    EXPECT_EQ(kIq2Signs[112 + i], last[i]) << i;
  }
  // The whole content, so that an accidental edit of a grid string cannot pass unnoticed.
  uint64_t h = 0xcbf29ce484222325ull;
  fnv1a(h, kIq2xxsGrid);
  fnv1a(h, kIq2xsGrid);
  fnv1a(h, kIq2sGrid);
  fnv1a(h, kIq3xxsGrid);
  fnv1a(h, kIq3sGrid);
  fnv1a(h, kIq1sGrid);
  EXPECT_EQ(h, 0x9d89f86e4257af40ull) << std::hex << h;
}

// ---------------------------------------------------------------------------------------------------
// Reference fixtures: every quantized tensor, bit for bit

nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

struct TypeTally {
  uint64_t tensors = 0, elements = 0, mismatches = 0;
};

// Dequantizes every tensor of `tensors` (expected.json records) that has a block format and compares it
// with its reference values bit for bit, adding up per-type counts in `tally`.
void check_tensors(const MappedFile& gguf, const nlohmann::json& tensors, const nlohmann::json& ref_index,
                   const MappedFile& ref, std::map<std::string, TypeTally>& tally) {
  for (const auto& t : tensors) {
    const std::string name = t["name"].get<std::string>();
    const uint32_t id = t["ggml_type_id"].get<uint32_t>();
    if (ggml_type(id) && ggml_type(id)->dense) continue;
    const GgmlBlockFormat* f = ggml_block_format(id);
    ASSERT_NE(f, nullptr) << name << ": no dequantizer for " << t["ggml_type"];
    const uint64_t elements = t["n_elements"].get<uint64_t>();
    const uint64_t n_bytes = t["n_bytes"].get<uint64_t>();
    const uint64_t data_offset = t["data_offset"].get<uint64_t>();
    ASSERT_EQ(elements % f->block_elements, 0u) << name;
    const uint64_t blocks = elements / f->block_elements;
    ASSERT_EQ(n_bytes, blocks * f->block_bytes) << name;
    ASSERT_LE(data_offset + n_bytes, gguf.size()) << name;
    const auto& r = ref_index.at(name);
    ASSERT_EQ(r["count"].get<uint64_t>(), elements) << name;
    const uint64_t ref_offset = r["offset"].get<uint64_t>();
    ASSERT_LE(ref_offset + elements * 4, ref.size()) << name;

    // Decode from an odd address: the decoders must not rely on alignment.
    std::vector<uint8_t> bytes(n_bytes + 1);
    gguf.read_at(data_offset, bytes.data() + 1, n_bytes);
    std::vector<float> got(elements), want(elements);
    dequantize_ggml_blocks(*f, bytes.data() + 1, blocks, got.data());
    ref.read_at(ref_offset, want.data(), elements * 4);

    uint64_t mismatches = 0;
    std::ostringstream first;
    for (uint64_t i = 0; i < elements; ++i) {
      if (std::memcmp(&got[i], &want[i], 4) == 0) continue;
      if (mismatches++ < 4)
        first << "\n  [" << i << "] got " << got[i] << " (0x" << std::hex << f32_bits(got[i]) << ") want " << std::dec
              << want[i] << " (0x" << std::hex << f32_bits(want[i]) << ")" << std::dec;
    }
    EXPECT_EQ(mismatches, 0u) << name << " (" << f->name << "): " << mismatches << " of " << elements
                              << " values differ" << first.str();
    auto& k = tally[f->name];
    ++k.tensors;
    k.elements += elements;
    k.mismatches += mismatches;
  }
}

void print_tally(const std::string& set, const std::map<std::string, TypeTally>& tally) {
  for (const auto& [type, k] : tally)
    std::printf("[ dequant  ] %s %-8s %llu tensor(s), %llu elements, %llu mismatches\n", set.c_str(), type.c_str(),
                static_cast<unsigned long long>(k.tensors), static_cast<unsigned long long>(k.elements),
                static_cast<unsigned long long>(k.mismatches));
}

TEST(DequantFixtures, EveryQuantizedTensorOfTheMixedSetIsBitIdentical) {
  const std::string dir = kFixtures + "/gguf";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "SKIPPED: reference fixtures not found at " << dir;
  const auto expected = load_json(dir + "/tiny-mixed.expected.json");
  const auto ref_index = load_json(dir + "/tiny-mixed.ref.json");
  const MappedFile gguf(dir + "/tiny-mixed.gguf"), ref(dir + "/tiny-mixed.ref.f32");
  for_each_simd_target([&](const std::string& target, bool is_default) {
    std::map<std::string, TypeTally> tally;
    check_tensors(gguf, expected["tensors"], ref_index, ref, tally);
    if (is_default || HasFailure()) print_tally("tiny-mixed " + target, tally);
    EXPECT_EQ(tally.size(), 22u) << "the fixture holds 22 quantized types (all but Q8_1 and Q8_K)";
  });
}

TEST(DequantFixtures, EveryQuantizedTensorOfTheSplitSetIsBitIdentical) {
  const std::string dir = kFixtures + "/gguf/split";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "SKIPPED: reference fixtures not found at " << dir;
  const auto expected = load_json(dir + "/tiny-split.expected.json");
  const auto ref_index = load_json(dir + "/tiny-split.ref.json");
  const MappedFile ref(dir + "/tiny-split.ref.f32");
  for_each_simd_target([&](const std::string& target, bool is_default) {
    std::map<std::string, TypeTally> tally;
    for (const auto& shard : expected["shards"]) {
      const MappedFile gguf(dir + "/" + shard["header"]["file"].get<std::string>());
      check_tensors(gguf, shard["tensors"], ref_index, ref, tally);
    }
    if (is_default || HasFailure()) print_tally("tiny-split " + target, tally);
    EXPECT_EQ(tally.size(), 11u);
  });
}

// ---------------------------------------------------------------------------------------------------
// Throughput of the hot formats, single thread (printed; asserts nothing about speed)

TEST(DequantThroughput, HotFormatsSingleThread) {
  struct Hot {
    uint32_t id;
    std::vector<size_t> fp16_fields;  // byte offsets of the block's fp16 scales (set to finite values)
  };
  const Hot hot[] = {{2, {0}}, {8, {0}}, {12, {0, 2}}, {14, {208}}};
  std::mt19937 rng(1);
  for (const auto& h : hot) {
    const GgmlBlockFormat& f = format_of(h.id);
    const uint64_t blocks = (uint64_t{1} << 20) / f.block_elements;  // 1 Mi elements, 4 MiB out
    std::vector<uint8_t> bytes(blocks * f.block_bytes);
    for (auto& v : bytes) v = static_cast<uint8_t>(rng());
    for (uint64_t i = 0; i < blocks; ++i)
      for (size_t at : h.fp16_fields) put_u16(bytes, i * f.block_bytes + at, 0x2e66);  // ~0.1
    std::vector<float> out(blocks * f.block_elements);
    double best = 1e30;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      dequantize_ggml_blocks(f, bytes.data(), blocks, out.data());
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("[ dequant  ] %-5s %.2f G elements/s (%.2f GB/s written), single thread, %s\n", f.name,
                out.size() / best * 1e-9, out.size() * 4.0 / best * 1e-9, default_target().c_str());
    EXPECT_TRUE(std::isfinite(out[out.size() / 2]));
  }
}

}  // namespace
}  // namespace tmorph::cpu
