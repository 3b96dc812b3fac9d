// The writer's half of the ggml block formats (checkpoint/ggml_quantize.h) and the GGUF writer
// (formats/gguf_writer.h): every quantized block decoded by the CPU backend's dequantizer (the reader every face
// uses) stays within the format's error bound of the values it came from; Q4_K's bytes are also decoded here from
// the layout alone and must agree bit for bit; a written file parses back (keys, tensors, alignment, bytes); and
// where the shared fixtures are present, gguf-py's Q8_0/Q5_0 blocks re-quantized from their own decoded values come
// out byte for byte the same, and the fixture's Q4_K values go through our writer and reader within 1.5 steps.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/ggml_quantize.h"
#include "core/mapped_file.h"
#include "cpu/dequant/ggml_dequant.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace ggml_quantize_test {  // named: the unit tests compile as unity batches

std::vector<float> decode(uint32_t id, const std::vector<uint8_t>& bytes, uint64_t n) {
  const cpu::GgmlBlockFormat* f = cpu::ggml_block_format(id);
  EXPECT_NE(f, nullptr);
  std::vector<float> out(n);
  cpu::dequantize_ggml_blocks(*f, bytes.data(), n / f->block_elements, out.data());
  return out;
}

// Normal values with a few planted outliers (x 30), as real weights have.
std::vector<float> weights(uint64_t n, uint32_t seed, float sigma = 0.05f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = normal(rng);
  for (uint64_t i = 17; i < n; i += 977) x[i] *= 30.0f;
  return x;
}

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_bits_to_f32(h);
}

double rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(s / a.size());
}

TEST(GgmlQuantize, Fp16ConversionRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_bits_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_bits_to_f32(f32_to_fp16_bits(f))));
      continue;
    }
    ASSERT_EQ(f32_to_fp16_bits(f), h) << "half 0x" << std::hex << h;
    // The midpoint to the next half up (same sign) rounds to whichever of the two has an even mantissa.
    if ((h & 0x7fff) < 0x7bff) {
      const float next = fp16_bits_to_f32(static_cast<uint16_t>(h + 1));
      const float mid = f + (next - f) / 2;  // exact: both are halves, their midpoint has 12 significant bits
      EXPECT_EQ(f32_to_fp16_bits(mid), (h & 1) ? h + 1 : h) << "midpoint above half 0x" << std::hex << h;
    }
  }
  EXPECT_EQ(f32_to_fp16_bits(65520.0f), 0x7c00);  // rounds to infinity
  EXPECT_EQ(f32_to_fp16_bits(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_fp16_bits(0x1p-25f), 0x0000);  // half the smallest subnormal: ties to even (0)
  EXPECT_EQ(f32_to_fp16_bits(0x1.8p-25f), 0x0001);
}

TEST(GgmlQuantize, Q8_0RoundTripIsWithinHalfAStepPerBlock) {
  const std::vector<float> x = weights(32 * 300, 1);
  std::vector<uint8_t> q(300 * 34);
  quantize_q8_0(x.data(), x.size(), q.data());
  const std::vector<float> y = decode(8, q, x.size());
  for (uint64_t b = 0; b < 300; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    const float d = amax / 127, d16 = half_at(&q[34 * b]);
    EXPECT_EQ(f32_to_fp16_bits(d), f32_to_fp16_bits(d16)) << "block " << b;
    // |x - d q| <= d / 2 from rounding, plus |q| <= 127 times d's fp16 rounding.
    const double bound = 0.5 * d * (1 + 1e-5) + 127.0 * std::fabs(double(d16) - d);
    for (int i = 0; i < 32; ++i) ASSERT_LE(std::fabs(double(y[32 * b + i]) - x[32 * b + i]), bound) << "block " << b << " value " << i;
  }
}

TEST(GgmlQuantize, Q5_0RoundTripIsWithinOneStepPerBlock) {
  const std::vector<float> x = weights(32 * 300, 2);
  std::vector<uint8_t> q(300 * 22);
  quantize_q5_0(x.data(), x.size(), q.data());
  const std::vector<float> y = decode(6, q, x.size());
  uint64_t within_half = 0;
  for (uint64_t b = 0; b < 300; ++b) {
    float max = 0;
    for (int i = 0; i < 32; ++i)
      if (std::fabs(x[32 * b + i]) > std::fabs(max)) max = x[32 * b + i];
    const double d = std::fabs(max / -16.0f), d16 = std::fabs(half_at(&q[22 * b]));
    // The largest magnitude is code 0 (exact up to d's rounding); the other side clips at code 31, one step short.
    const double bound = d * (1 + 1e-5) + 16.0 * std::fabs(d16 - d);
    for (int i = 0; i < 32; ++i) {
      const double err = std::fabs(double(y[32 * b + i]) - x[32 * b + i]);
      ASSERT_LE(err, bound) << "block " << b << " value " << i;
      within_half += err <= 0.5 * d * (1 + 1e-5) + 16.0 * std::fabs(d16 - d);
    }
  }
  EXPECT_GT(within_half, x.size() * 99 / 100);  // only values beyond +15.5 steps clip
}

// Q4_K decoded from the layout alone (ggml's block_q4_K and get_scale_min_k4), in the reader's operation order.
std::vector<float> decode_q4_k_here(const std::vector<uint8_t>& q, uint64_t n) {
  std::vector<float> y(n);
  for (uint64_t b = 0; b < n / 256; ++b) {
    const uint8_t* p = &q[144 * b];
    const float d = half_at(p), dmin = half_at(p + 2);
    const uint8_t* s = p + 4;
    for (int j = 0; j < 8; ++j) {
      const int sc = j < 4 ? (s[j] & 63) : ((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
      const int m = j < 4 ? (s[j + 4] & 63) : ((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
      const float step = d * static_cast<float>(sc), offset = dmin * static_cast<float>(m);
      for (int i = 0; i < 32; ++i) {
        const uint8_t byte = p[16 + 32 * (j / 2) + i];
        const int code = (j % 2) ? byte >> 4 : byte & 0x0F;
        y[256 * b + 32 * j + i] = step * static_cast<float>(code) - offset;
      }
    }
  }
  return y;
}

// The widest sub-block's plain 4-bit step, (max - min(0, min)) / 15, of super-block b of x.
double widest_step(const std::vector<float>& x, uint64_t b) {
  double widest = 0;
  for (int j = 0; j < 8; ++j) {
    float lo = 0, hi = x[256 * b + 32 * j];
    for (int i = 0; i < 32; ++i) lo = std::min(lo, x[256 * b + 32 * j + i]), hi = std::max(hi, x[256 * b + 32 * j + i]);
    widest = std::max(widest, double(hi) - lo);
  }
  return widest / 15;
}

TEST(GgmlQuantize, Q4_KBytesFollowTheLayoutAndTakeTheNearestCode) {
  const std::vector<float> x = weights(256 * 64, 3);
  std::vector<uint8_t> q(64 * 144);
  quantize_q4_k(x.data(), x.size(), q.data());
  const std::vector<float> y = decode(12, q, x.size()), here = decode_q4_k_here(q, x.size());
  ASSERT_EQ(0, std::memcmp(y.data(), here.data(), y.size() * 4)) << "the reader and the layout disagree";
  for (uint64_t b = 0; b < 64; ++b) {
    // Each value's code is the nearest of the 16 its sub-block's stored step and offset give (the least-squares
    // scale may leave the extremes clipped, never a code farther than another)...
    const float d = half_at(&q[144 * b]), dmin = half_at(&q[144 * b + 2]);
    for (int j = 0; j < 8; ++j) {
      const uint8_t* s = &q[144 * b + 4];
      const int sc = j < 4 ? (s[j] & 63) : ((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4));
      const int m = j < 4 ? (s[j + 4] & 63) : ((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
      const float step = d * static_cast<float>(sc), offset = dmin * static_cast<float>(m);
      for (int i = 0; i < 32; ++i) {
        const uint64_t k = 256 * b + 32 * j + i;
        double best = INFINITY;
        for (int code = 0; code < 16; ++code) best = std::min(best, std::fabs(double(step * static_cast<float>(code) - offset) - x[k]));
        ASSERT_LE(std::fabs(double(y[k]) - x[k]), best + 1e-6 * std::fabs(x[k]) + 1e-12) << "block " << b << " value " << 32 * j + i;
      }
    }
    // ... and within one and a half plain steps of the widest sub-block (the 6-bit scales and the fit's clipping).
    for (int i = 0; i < 256; ++i)
      ASSERT_LE(std::fabs(double(y[256 * b + i]) - x[256 * b + i]), 1.5 * widest_step(x, b)) << "block " << b << " value " << i;
  }
  // Gaussian weights: 4 bits with a fitted min and scale per 32 values give about 9% relative RMSE; Q8_0 far less.
  std::vector<uint8_t> q8(x.size() / 32 * 34);
  quantize_q8_0(x.data(), x.size(), q8.data());
  double norm = 0;
  for (float v : x) norm += double(v) * v;
  const double rel4 = rmse(x, y) / std::sqrt(norm / x.size()), rel8 = rmse(x, decode(8, q8, x.size())) / std::sqrt(norm / x.size());
  EXPECT_LT(rel4, 0.12);
  EXPECT_GT(rel4, 4 * rel8);
}

TEST(GgmlQuantize, SpecialBlocks) {
  // All zero; constant negative; NaN and +/-Inf among finite values.
  std::vector<float> x(256, 0.0f);
  for (int i = 32; i < 64; ++i) x[i] = -0.75f;
  for (int i = 64; i < 96; ++i) x[i] = 0.01f * static_cast<float>(i - 80);
  x[70] = NAN, x[71] = INFINITY, x[72] = -INFINITY;
  for (uint32_t id : {8u, 6u, 12u}) {
    const uint64_t block = id == 12 ? 256 : 32, bytes = id == 12 ? 144 : id == 8 ? 34 : 22;
    std::vector<uint8_t> q(256 / block * bytes);
    (id == 8 ? quantize_q8_0 : id == 6 ? quantize_q5_0 : quantize_q4_k)(x.data(), 256, q.data());
    const std::vector<float> y = decode(id, q, 256);
    for (int i = 0; i < 256; ++i) ASSERT_TRUE(std::isfinite(y[i])) << "type " << id << " value " << i;
    for (int i = 0; i < 32; ++i) EXPECT_EQ(y[i], 0.0f) << "type " << id;
    for (int i = 32; i < 64; ++i) EXPECT_NEAR(y[i], -0.75f, 0.75 / 100) << "type " << id;
    EXPECT_NEAR(y[70], 0.0f, 0.16 / 7) << "NaN is stored near 0, type " << id;
    EXPECT_NEAR(y[71], 0.16f, 0.16 / 7) << "+Inf is stored near the largest finite magnitude, type " << id;
    EXPECT_NEAR(y[72], -0.16f, 0.16 / 7) << "-Inf, type " << id;
    for (int i = 64; i < 96; ++i) {
      if (i >= 70 && i <= 72) continue;
      EXPECT_NEAR(y[i], x[i], 0.32 / 7) << "type " << id << " value " << i;
    }
  }
  std::vector<uint8_t> q(34);
  EXPECT_THROW(quantize_q8_0(x.data(), 31, q.data()), Error);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tm-gguf-writer-" + std::to_string(::getpid()) + "-" + name)).string();
}

TEST(GgufWriter, WritesAFileTheReaderParses) {
  const std::string path = temp_path("a.gguf");
  const std::vector<float> x = weights(256 * 4, 5);
  std::vector<uint8_t> q4(4 * 144);
  quantize_q4_k(x.data(), x.size(), q4.data());
  const std::vector<float> norm = {1.0f, 2.0f, 3.0f};
  {
    GgufWriter w(path);
    w.add_string("general.architecture", "llama");
    w.add_u32("llama.block_count", 4);
    w.add_f32("llama.rope.freq_base", 10000.0f);
    w.add_u64("x.count", uint64_t{1} << 40);
    w.add_bool("x.flag", true);
    EXPECT_THROW(w.add_u32("llama.block_count", 5), Error);
    EXPECT_EQ(w.add_tensor("w", 12, {4, 256}), 4u * 144);
    EXPECT_EQ(w.add_tensor("norm", 0, {3}), 12u);
    EXPECT_THROW(w.add_tensor("bad", 12, {2, 100}), Error);  // row of 100 is not whole Q4_K blocks
    EXPECT_THROW(w.add_tensor("w", 0, {3}), Error);
    w.write_header();
    EXPECT_THROW(w.write_tensor("norm", norm.data(), 12), Error);  // out of order
    w.write_tensor("w", q4.data(), q4.size());
    EXPECT_THROW(w.write_tensor("norm", norm.data(), 8), Error);  // short
    w.write_tensor("norm", norm.data(), 12);
    w.finish();
  }
  const MappedFile file(path);
  const GgufFile g = parse_gguf(file.data(), file.size(), path);
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.kv_count, 5u);
  EXPECT_EQ(g.find("general.architecture")->value, "llama");
  EXPECT_EQ(g.find("llama.block_count")->type, GgufType::U32);
  EXPECT_EQ(g.find("llama.rope.freq_base")->value, 10000.0);
  EXPECT_EQ(g.find("x.count")->value, uint64_t{1} << 40);
  EXPECT_EQ(g.find("x.flag")->value, true);
  ASSERT_EQ(g.tensors.size(), 2u);
  EXPECT_EQ(g.data_section_offset % 32, 0u);
  EXPECT_EQ(g.tensors[0].shape, (std::vector<uint64_t>{4, 256}));
  EXPECT_EQ(g.tensors[0].ne, (std::vector<uint64_t>{256, 4}));
  EXPECT_STREQ(g.tensors[0].type->name, "Q4_K");
  EXPECT_EQ(g.tensors[1].offset, 576u);  // 576 = 18 x 32: already aligned
  EXPECT_EQ(0, std::memcmp(file.data() + g.tensors[0].data_offset, q4.data(), q4.size()));
  EXPECT_EQ(0, std::memcmp(file.data() + g.tensors[1].data_offset, norm.data(), 12));
  EXPECT_EQ(file.size(), g.tensors[1].data_offset + 32);  // the last tensor padded to the alignment
  std::filesystem::remove(path);

  // A writer dropped before finish() leaves nothing behind.
  {
    GgufWriter w(path);
    w.add_tensor("norm", 0, {3});
    w.write_header();
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".partial"));
}

// gguf-py's quantized tensors of the shared reference set (llama.cpp's package): re-quantizing their decoded values
// gives back their bytes for Q8_0 and Q5_0 (the largest magnitude of each block decodes to the code that defines d,
// so d is found again exactly); Q4_K's values (random valid blocks there) written by our writer decode through the
// same reader within one and a half steps.
TEST(GgmlQuantizeFixtures, Gguf_pyBlocksComeBackFromTheirValues) {
  const std::string dir = std::string(TM_FIXTURES_DIR) + "/gguf";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "SKIPPED: reference fixtures not found at " << dir;
  nlohmann::json ref_index;
  std::ifstream(dir + "/tiny-mixed.ref.json") >> ref_index;
  const MappedFile file(dir + "/tiny-mixed.gguf"), ref(dir + "/tiny-mixed.ref.f32");
  const GgufFile g = parse_gguf(file.data(), file.size(), dir + "/tiny-mixed.gguf", GgufArrays::Summary);
  int checked = 0;
  for (const auto& t : g.tensors) {
    const std::string type = t.type->name;
    if (type != "Q8_0" && type != "Q5_0" && type != "Q4_K") continue;
    std::vector<float> values(t.elements);
    ref.read_at(ref_index.at(t.name)["offset"].get<uint64_t>(), values.data(), t.elements * 4);
    std::vector<uint8_t> ours(t.bytes);
    if (type == "Q8_0" || type == "Q5_0") {
      (type == "Q8_0" ? quantize_q8_0 : quantize_q5_0)(values.data(), t.elements, ours.data());
      EXPECT_EQ(0, std::memcmp(ours.data(), file.data() + t.data_offset, t.bytes)) << t.name << " (" << type << ")";
    } else {
      const std::string path = temp_path("fixture-q4k.gguf");
      quantize_q4_k(values.data(), t.elements, ours.data());
      GgufWriter w(path);
      w.add_tensor(t.name, 12, t.shape);
      w.write_header();
      w.write_tensor(t.name, ours.data(), ours.size());
      w.finish();
      const MappedFile back(path);
      const GgufFile gb = parse_gguf(back.data(), back.size(), path);
      ASSERT_EQ(gb.tensors.size(), 1u);
      std::vector<uint8_t> stored(back.data() + gb.tensors[0].data_offset, back.data() + gb.tensors[0].data_offset + t.bytes);
      const std::vector<float> y = decode(gb.tensors[0].type->id, stored, t.elements);
      for (uint64_t b = 0; b < t.elements / 256; ++b)
        for (int i = 0; i < 256; ++i)
          ASSERT_LE(std::fabs(double(y[256 * b + i]) - values[256 * b + i]), 1.5 * widest_step(values, b)) << t.name << " block " << b;
      std::filesystem::remove(path);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

}  // namespace ggml_quantize_test
}  // namespace tmorph
