// Parity of the CUDA/HIP kernel source with the CPU reference (backends/gpu), for each GPU backend: under
// the host grid emulation in CI (gpuemu), and on real devices where they exist (cuda, hip; see
// gpu_fixture.h). Data: salted random values (NaN, ±Inf, subnormals, ±0), blocks whose mean dwarfs their
// spread (the two-pass m2), sizes that are not multiples of the block or the launch, and pieces shrunk to
// a few KiB (TENSORMORPH_GPU_CHUNK_BYTES) so one call spans several uploads and launches.
#include "compact_sums_support.h"
#include "gpu_fixture.h"

#include <random>

namespace tmorph::gpu_test {
namespace {

// TENSORMORPH_GPU_CHUNK_BYTES for one test: pieces of a few KiB, so one call spans several uploads and launches.
struct ScopedChunk : test::ScopedEnv {
  explicit ScopedChunk(const char* bytes) : test::ScopedEnv("TENSORMORPH_GPU_CHUNK_BYTES", bytes) {}
};

std::vector<uint64_t> sizes() { return {1, 15, 17, 257, 65535, 65536, 65537, 2 * 65536 + 12345}; }

TEST_P(GpuParity, MomentsBitIdenticalForEveryDtypeAndSize) {
  ScopedChunk chunk(GetParam() == "gpuemu" ? "262144" : "1048576");
  const auto dts = dtypes_of(TM_OP_STATS_MOMENTS);
  ASSERT_EQ(dts.size(), 13u);  // every dtype but i64 and u64
  for (DType dt : dts)
    for (uint64_t n : sizes())
      for (int variant = 0; variant < 2; ++variant) {
        if (variant == 1 && dt != DType::F32) continue;
        const auto data = variant == 0 ? test::salted_data(dt, n, n * 31 + 7) : test::offset_data(dt, n, n + 3);
        const uint64_t blocks = (n + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
        std::vector<tm_moments_partial_v1> g(blocks), c(blocks);
        run(GetParam(), TM_OP_STATS_MOMENTS, dt, data, nullptr, 0, &g);
        run("cpu", TM_OP_STATS_MOMENTS, dt, data, nullptr, 0, &c);
        for (uint64_t b = 0; b < blocks; ++b)
          test::expect_same_partial(g[b], c[b], std::string(dtype_name(dt)) + " n=" + std::to_string(n) + " block " +
                                                    std::to_string(b) + " variant " + std::to_string(variant));
        if (HasFailure()) return;
      }
}

TEST_P(GpuParity, HistogramCountsEqualForEveryDtypeIncludingWideOnes) {
  ScopedChunk chunk("65536");
  const auto dts = dtypes_of(TM_OP_STATS_HISTOGRAM);
  ASSERT_EQ(dts.size(), 15u);
  for (DType dt : dts)
    for (uint64_t n : {uint64_t{17}, uint64_t{65537}, uint64_t{70001}}) {
      const auto data = test::salted_data(dt, n, n + 5);
      double lo, hi;
      test::finite_range(dt, data, &lo, &hi);
      for (uint32_t bins : {1u, 256u, 5000u}) {
        std::vector<double> edges(bins + 1);
        for (uint32_t i = 0; i <= bins; ++i) edges[i] = lo / 2 + (hi / 2 - lo / 2) * i / bins;
        if (!(edges[0] < edges[bins])) continue;
        bool increasing = true;
        for (uint32_t i = 0; i < bins; ++i) increasing = increasing && edges[i] < edges[i + 1];
        if (!increasing) continue;
        const tm_histogram_params_v1 params{bins, edges.data()};
        std::vector<uint64_t> g(bins + 2, 3), c(bins + 2, 3);  // counts are ADDED to what is there
        run(GetParam(), TM_OP_STATS_HISTOGRAM, dt, data, &params, sizeof params, &g);
        run("cpu", TM_OP_STATS_HISTOGRAM, dt, data, &params, sizeof params, &c);
        ASSERT_EQ(g, c) << dtype_name(dt) << " n=" << n << " bins=" << bins;
      }
    }
}

TEST_P(GpuParity, BitPatternCountsEqual) {
  ScopedChunk chunk("4096");
  for (DType dt : dtypes_of(TM_OP_STATS_BITPATTERN_HISTOGRAM)) {
    const auto data = test::salted_data(dt, 50001, 9);
    std::vector<uint64_t> g(size_t{1} << (8 * dtype_size(dt)), 1), c(g.size(), 1);
    run(GetParam(), TM_OP_STATS_BITPATTERN_HISTOGRAM, dt, data, nullptr, 0, &g);
    run("cpu", TM_OP_STATS_BITPATTERN_HISTOGRAM, dt, data, nullptr, 0, &c);
    ASSERT_EQ(g, c) << dtype_name(dt);
  }
}

// Exact quantiles: the CPU's values bit for bit for every dtype the CPU's exact kernel takes (32- and 64-bit
// keys: two and four counting passes), with repeats, ±0, NaN and ±Inf, sizes across pieces, and the edges
// (p = 0, 1; one finite value; no finite value).
TEST_P(GpuParity, QuantilesEqualTheCpuForEveryWideDtype) {
  ScopedChunk chunk("16384");
  const std::vector<double> probs = {0.0, 1e-6, 0.001, 0.25, 0.5, 0.5000001, 0.9, 0.999, 1.0};
  const tm_quantiles_params_v1 params{static_cast<uint32_t>(probs.size()), probs.data(), 64u << 20};
  const auto dts = dtypes_of(TM_OP_STATS_QUANTILES);
  ASSERT_EQ(dts.size(), 6u);
  for (DType dt : dts)
    for (uint64_t n : {uint64_t{1}, uint64_t{2}, uint64_t{1000}, uint64_t{70001}}) {
      auto data = test::salted_data(dt, n, n * 13 + 1);
      if (n == 1000)  // many repeats: ranks inside one key
        for (uint64_t i = 0; i < n; i += 2) std::memcpy(data.data() + i * dtype_size(dt), data.data(), dtype_size(dt));
      std::vector<tm_quantile_value_v1> g(probs.size()), c(probs.size());
      run(GetParam(), TM_OP_STATS_QUANTILES, dt, data, &params, sizeof params, &g);
      run("cpu", TM_OP_STATS_QUANTILES, dt, data, &params, sizeof params, &c);
      ASSERT_EQ(std::memcmp(g.data(), c.data(), g.size() * sizeof g[0]), 0)
          << dtype_name(dt) << " n=" << n << ": median " << g[4].value << " vs " << c[4].value;
    }
}

TEST_P(GpuParity, StemFrameSumsAndPatternReduceEqualTheCpu) {
  ScopedChunk chunk("8192");  // a few frames per piece
  const uint64_t rows = 40, cols = 33, pixels = rows * cols, frames = 37;
  std::vector<uint32_t> a, b;
  for (uint32_t i = 0; i < pixels; ++i) {
    if ((i / cols) % 3 == 0 && i % cols > 20) a.push_back(i);
    if (i % 7 == 0 || (i > 600 && i < 700)) b.push_back(i);
  }
  std::vector<uint64_t> offsets = {0, a.size(), a.size() + b.size(), a.size() + b.size()};  // list 2 empty
  std::vector<uint32_t> lists(a);
  lists.insert(lists.end(), b.begin(), b.end());
  ASSERT_EQ(dtypes_of(TM_OP_STEM_FRAME_SUMS).size(), 3u);
  for (DType dt : dtypes_of(TM_OP_STEM_FRAME_SUMS)) {
    for (const uint32_t com_list : {TM_STEM_ALL_PIXELS, 1u})
      for (const uint32_t flags : {0u, TM_STEM_LISTS_ONLY}) {
        const auto data = test::salted_data(dt, frames * pixels, 11 + flags + com_list % 7);
        const tm_stem_frame_sums_params_v1 params{pixels, static_cast<uint32_t>(cols), 3, offsets.data(), lists.data(), com_list, flags};
        std::vector<uint64_t> g(frames * 7, 1), c(frames * 7, 2);
        run(GetParam(), TM_OP_STEM_FRAME_SUMS, dt, data, &params, sizeof params, &g);
        run("cpu", TM_OP_STEM_FRAME_SUMS, dt, data, &params, sizeof params, &c);
        ASSERT_EQ(g, c) << dtype_name(dt) << " com_list " << com_list << " flags " << flags;
      }
    const auto data = test::salted_data(dt, frames * pixels, 5);
    const tm_stem_pattern_params_v1 params{pixels};
    std::vector<uint32_t> g(pixels * 3, 0), c(pixels * 3, 0);  // uint64 sums then uint32 maxima, accumulated
    for (uint64_t i = 0; i < pixels * 2; ++i) g[i] = c[i] = static_cast<uint32_t>(i * 7);
    run(GetParam(), TM_OP_STEM_PATTERN_REDUCE, dt, data, &params, sizeof params, &g);
    run("cpu", TM_OP_STEM_PATTERN_REDUCE, dt, data, &params, sizeof params, &c);
    ASSERT_EQ(g, c) << dtype_name(dt);
  }
}

// More work items than one launch's grid holds (65,535 blocks): 70,000 one-pixel frames (64 segments each)
// are covered by the frame kernel's grid-stride loop (as are the moments kernels').
TEST_P(GpuParity, LaunchesLargerThanTheGridCoverEveryItem) {
  const uint64_t frames = 70000;
  const auto data = test::salted_data(DType::U8, frames, 21);
  const tm_stem_frame_sums_params_v1 params{1, 1, 0, nullptr, nullptr, TM_STEM_ALL_PIXELS, 0};
  std::vector<uint64_t> g(frames * 4, 9), c(frames * 4, 8);
  run(GetParam(), TM_OP_STEM_FRAME_SUMS, DType::U8, data, &params, sizeof params, &g);
  run("cpu", TM_OP_STEM_FRAME_SUMS, DType::U8, data, &params, sizeof params, &c);
  ASSERT_EQ(g, c);
}

TEST_P(GpuParity, DisplayColorizeEqualsTheCpu) {
  ScopedChunk chunk("8192");
  std::mt19937_64 rng(3);
  std::vector<double> v(20011);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(static_cast<int64_t>(rng() % 4001) - 2000) / 7;
  v[3] = NAN, v[4] = INFINITY, v[5] = -INFINITY, v[6] = -0.0, v[7] = 1e300;
  std::vector<uint8_t> data(v.size() * 8);
  std::memcpy(data.data(), v.data(), data.size());
  for (uint32_t key : {TM_DISPLAY_KEY_VALUE, TM_DISPLAY_KEY_MAGNITUDE}) {
    tm_display_colorize_params_v1 p{};
    p.key_mode = key;
    for (uint32_t t = 0; t < TM_DISPLAY_THRESHOLDS; ++t) p.thresholds[t] = -250.0 + t * 2.0 - (t > 200 ? 0.0 : 0.5);
    p.thresholds[0] = -INFINITY, p.thresholds[254] = INFINITY;
    for (uint32_t c = 0; c < 256; ++c)
      for (uint32_t j = 0; j < 4; ++j) p.table[c][j] = static_cast<uint8_t>(c * 3 + j);
    const size_t bytes = TM_DISPLAY_COLORIZE_COUNTS * 8 + v.size() * 4;
    std::vector<uint8_t> g(bytes, 0), c(bytes, 0);
    run(GetParam(), TM_OP_DISPLAY_COLORIZE, DType::F64, data, &p, sizeof p, &g);
    run("cpu", TM_OP_DISPLAY_COLORIZE, DType::F64, data, &p, sizeof p, &c);
    ASSERT_EQ(g, c) << "key mode " << key;
  }
}

// Decodes random blocks of each format on the backend and the CPU: every value bit for bit (NaN payloads aside),
// fp16 scales of every class included (subnormal, zero, ±Inf, NaN) at scale_at in a third of the blocks.
struct BlockFormat {
  uint32_t type, bytes, scale_at;  // scale_at: an fp16 scale's offset in the block (UINT32_MAX: none)
};
void expect_decoding_bit_identical(const GpuParity& t, const std::string& backend, const std::vector<BlockFormat>& formats,
                                   uint32_t block_elements, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const uint16_t special[] = {0x0001, 0x03FF, 0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x3C00, 0xBC00};
  for (const BlockFormat f : formats)
    for (uint64_t blocks : {uint64_t{1}, uint64_t{33}, uint64_t{300}}) {
      std::vector<uint8_t> data(blocks * f.bytes);
      for (auto& b : data) b = static_cast<uint8_t>(rng());
      if (f.scale_at != UINT32_MAX)
        for (uint64_t k = 0; k < blocks; k += 3) std::memcpy(&data[k * f.bytes + f.scale_at], &special[(k / 3) % 9], 2);
      const tm_dequantize_ggml_params_v1 params{f.type, 0};
      std::vector<float> g(blocks * block_elements), c(blocks * block_elements);
      t.run_on(backend, data, params, &g, f.type);
      t.run_on("cpu", data, params, &c, f.type);
      for (size_t i = 0; i < g.size(); ++i) {
        if (std::isnan(c[i])) {
          ASSERT_TRUE(std::isnan(g[i])) << "type " << f.type << " value " << i;
          continue;
        }
        uint32_t x, y;
        std::memcpy(&x, &g[i], 4), std::memcpy(&y, &c[i], 4);
        ASSERT_EQ(x, y) << "type " << f.type << " value " << i << ": " << g[i] << " vs " << c[i];
      }
    }
}

TEST_P(GpuParity, DequantizeLegacyGgmlBlocksBitIdentical) {
  ScopedChunk chunk("4096");
  expect_decoding_bit_identical(*this, GetParam(), {{2, 18, 0}, {3, 20, 0}, {6, 22, 0}, {7, 24, 0}, {8, 34, 0}}, 32, 77);
}

TEST_P(GpuParity, DequantizeKQuantsBitIdentical) {
  ScopedChunk chunk("4096");
  expect_decoding_bit_identical(*this, GetParam(),
                                {{10, 84, 80}, {11, 110, 108}, {12, 144, 0}, {13, 176, 2}, {14, 210, 208}, {15, 292, UINT32_MAX}},
                                256, 78);
}

// quant.moments: the CPU's exact partials bit for bit, min and max with their zero signs, for Q4_0 and Q8_0:
// random codes and fp16 scales of every class; a whole and a short canonical block; and positive values
// whose minimum is a zero whose sign depends on the block order. Pieces smaller than a canonical block.
TEST_P(GpuParity, QuantMomentsBitIdentical) {
  ScopedChunk chunk("4096");
  std::mt19937_64 rng(79);
  const uint16_t special[] = {0x0001, 0x03FF, 0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x7BFF, 0xFBFF};
  for (const uint32_t type : {2u, 8u}) {
    const uint32_t bytes = type == 8 ? 34 : 18;
    for (const uint64_t blocks : {uint64_t{1}, uint64_t{2048}, uint64_t{2 * 2048 + 37}})
      for (int variant = 0; variant < 3; ++variant) {
        std::vector<uint8_t> data(blocks * bytes);
        for (auto& b : data) b = static_cast<uint8_t>(rng());
        for (uint64_t k = 0; k < blocks; ++k) {
          uint8_t* block = &data[k * bytes];
          if (variant == 1 && k % 3 == 0) std::memcpy(block, &special[(k / 3) % 9], 2);
          if (variant == 2) {  // codes > 0, scales >= 0 (block 1: -0, block 2: +0)
            for (uint32_t i = 2; i < bytes; ++i) block[i] = type == 8 ? 1 + block[i] % 127 : 0x99 | (block[i] & 0x66);
            block[1] &= 0x3b;
            if (k == 1 || k == 2) block[0] = 0, block[1] = k == 1 ? 0x80 : 0;
          }
        }
        const uint64_t canonical = (blocks * 32 + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
        std::vector<tm_moments_partial_v1> g(canonical), c(canonical);
        const tm_dequantize_ggml_params_v1 params{type, 0};
        test::run_kernel_on(*registry_, costs_, GetParam(), TM_OP_QUANT_MOMENTS, DType::F32, data, &params, sizeof params, &g,
                            blocks * 32, type);
        test::run_kernel_on(*registry_, costs_, "cpu", TM_OP_QUANT_MOMENTS, DType::F32, data, &params, sizeof params, &c,
                            blocks * 32, type);
        for (uint64_t b = 0; b < canonical; ++b) {
          const std::string where = "type " + std::to_string(type) + " blocks " + std::to_string(blocks) + " variant " +
                                    std::to_string(variant) + " canonical block " + std::to_string(b);
          test::expect_same_partial(g[b], c[b], where);
          EXPECT_EQ(std::signbit(g[b].min), std::signbit(c[b].min)) << where;
          EXPECT_EQ(std::signbit(g[b].max), std::signbit(c[b].max)) << where;
        }
        if (HasFailure()) return;
      }
  }
}

// A resident copy serves moments without the host input, and reads outside it are refused.
TEST_P(GpuParity, ResidentCopyServesCallsAndBoundsAreChecked) {
  const uint64_t n = 3 * 65536;
  const auto data = test::salted_data(DType::F16, n, 4);
  uint64_t handle = 0;
  tm_message msg{};
  ASSERT_EQ(backend_->table->upload(0, data.data(), data.size(), &handle, &msg), TM_OK) << msg.text;
  const Placement p = [&] {
    OpRequest r;
    r.op = TM_OP_STATS_MOMENTS, r.dtype = DType::F16, r.elements = n, r.bytes = data.size();
    Constraints c;
    c.strict_backend = GetParam();
    return Planner(*registry_, costs_, c).place(r);
  }();
  std::vector<tm_moments_partial_v1> g(2), c(2);
  tm_kernel_call_v1 call{};
  call.struct_size = sizeof call;
  call.op = TM_OP_STATS_MOMENTS, call.kernel_index = p.kernel_index, call.dtype = TM_DTYPE_F16;
  call.input = data.data() + 65536 * 2, call.element_count = 2 * 65536;
  call.output = g.data(), call.output_size = g.size() * sizeof g[0], call.threads = 1;
  call.input_buffer = handle, call.input_offset = 65536 * 2;
  ASSERT_EQ(backend_->table->run(&call, &msg), TM_OK) << msg.text;
  run("cpu", TM_OP_STATS_MOMENTS, DType::F16, std::vector<uint8_t>(data.begin() + 65536 * 2, data.end()), nullptr, 0, &c);
  for (int b = 0; b < 2; ++b) test::expect_same_partial(g[b], c[b], "resident block " + std::to_string(b));
  call.input_offset = 65536 * 4;  // the call would read past the copy
  EXPECT_EQ(backend_->table->run(&call, &msg), TM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg.text).find("outside its resident copy"), std::string::npos) << msg.text;
  backend_->table->release(handle);
  call.input_offset = 0;
  EXPECT_EQ(backend_->table->run(&call, &msg), TM_ERR_INVALID_ARGUMENT);  // released: no such copy
}

// stem.compact_sums from a device copy uploaded once (the residency extension) and from a host image: the same
// integers as the CPU op and the copy's own sums (uint16 and uint32 keys, pixel and radial order, several pages,
// fixed sums and lists only, a centre-of-mass list); malformed calls refused naming the field or the page.
TEST_P(GpuParity, CompactSumsFromTheDeviceCopyEqualTheCpuOp) {
  for (const test::CompactShape& sh : test::compact_shapes()) {
    if (sh.dt == DType::U8) continue;  // the U8 copy is left to the CPU and Vulkan tests, as before
    const test::CompactCase c = test::compact_case(sh.count, sh.rows, sh.cols, sh.dt, sh.density, sh.radial, 31);
    const CompactImage image = compact_image(*c.frames);
    Constraints strict;
    strict.strict_backend = GetParam();
    const Placement on_gpu = Planner(*registry_, costs_, strict).place(compact_sums_request(*c.frames, {}));
    const Placement on_cpu = test::cpu_planner().place(compact_sums_request(*c.frames, {}));
    std::string why;
    const std::unique_ptr<DeviceCopy> device = make_device_copy(*c.frames, on_gpu, 0, &why);
    ASSERT_TRUE(device) << why;
    EXPECT_EQ(device->location.rfind(GetParam() + "/", 0), 0u) << device->location;
    for (const bool fixed : {true, false})
      for (const auto* com : {&c.com, static_cast<const std::vector<uint32_t>*>(nullptr)}) {
        const std::string what = std::to_string(sh.rows) + "x" + std::to_string(sh.cols) + (fixed ? " fixed" : " lists") + (com ? " com" : "");
        const auto want = c.frames->sums(c.detectors, com, fixed, c.positions, 2);
        test::expect_same_sums(want, compact_sums(on_cpu, *c.frames, nullptr, &image, c.detectors, com, fixed, c.positions, 2), "cpu " + what);
        test::expect_same_sums(want, compact_sums(on_gpu, *c.frames, device.get(), nullptr, c.detectors, com, fixed, c.positions, 2),
                               GetParam() + " device copy " + what);
        test::expect_same_sums(want, compact_sums(on_gpu, *c.frames, nullptr, &image, c.detectors, com, fixed, c.positions, 2),
                               GetParam() + " host image " + what);
      }
  }
  const test::CompactCase small = test::compact_case(12, 13, 11, DType::U16, 0.4, false, 3);
  Constraints strict;
  strict.strict_backend = GetParam();
  test::expect_malformed_calls_refused(Planner(*registry_, costs_, strict).place(compact_sums_request(*small.frames, {})), small);
}

INSTANTIATE_TEST_SUITE_P(Backends, GpuParity, ::testing::Values("gpuemu", "cuda", "hip"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tmorph::gpu_test
