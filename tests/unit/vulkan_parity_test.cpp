// Parity of every Vulkan kernel with the CPU reference, through the real plugin on the real driver
// (Mesa lavapipe in CI). Data: salted random values (NaN, ±Inf, subnormals, ±0), blocks whose mean
// dwarfs their spread (the two-pass m2), integers spanning their whole range, and sizes that are not
// multiples of the workgroup, the 65,536-element block or the chunk (chunks are shrunk to a few
// blocks through TENSORMORPH_VULKAN_CHUNK_BYTES).
#include "display_goldens.h"
#include "compact_sums_support.h"
#include "vulkan_fixture.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "display/colormap.h"
#include "display/display_kernels.h"
#include "display/placed_colorize.h"

namespace tmorph::vulkan_test {
namespace {

TEST_F(VulkanParity, MomentsBitIdenticalForEveryDtypeSizeAndChunking) {
  for (const std::string chunk : {"", "262144"}) {  // default chunks, then one block of f32 per chunk
    ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", chunk);
    for (DType dt : dtypes_of(TM_OP_STATS_MOMENTS)) {
      for (uint64_t n : sizes()) {
        for (int variant = 0; variant < 2; ++variant) {
          const auto data = variant == 0 ? test::salted_data(dt, n, n * 31 + 7) : offset_data(dt, n, n * 17 + 3);
          const uint64_t blocks = (n + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
          std::vector<tm_moments_partial_v1> v(blocks), c(blocks);
          run("vulkan", TM_OP_STATS_MOMENTS, dt, data, nullptr, 0, &v);
          run("cpu", TM_OP_STATS_MOMENTS, dt, data, nullptr, 0, &c);
          for (uint64_t b = 0; b < blocks; ++b)
            test::expect_same_partial(v[b], c[b], std::string(dtype_name(dt)) + " n=" + std::to_string(n) + " variant " +
                                                std::to_string(variant) + " chunk '" + chunk + "' block " +
                                                std::to_string(b));
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST_F(VulkanParity, HistogramCountsEqualForUniformIrregularAndManyBins) {
  ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", "65536");
  for (DType dt : dtypes_of(TM_OP_STATS_HISTOGRAM)) {
    for (uint64_t n : {uint64_t{17}, uint64_t{65537}, uint64_t{3 * 65536 + 12345}}) {
      const auto data = test::salted_data(dt, n, n + 5);
      const auto values = test::to_doubles(dt, data);  // irregular edges are picked among them
      double lo, hi;
      test::finite_range(dt, data, &lo, &hi);
      std::mt19937_64 rng(n);
      for (int kind = 0; kind < 3; ++kind) {
        // 256 uniform bins over the middle of the range (values fall below and above too); irregular
        // edges at data values (exact edge hits); 5000 bins (more than shared memory counts).
        const uint32_t bins = kind == 2 ? 5000 : 256;
        std::vector<double> edges(bins + 1);
        for (uint32_t i = 0; i <= bins; ++i) edges[i] = lo / 2 + (hi / 2 - lo / 2) * i / bins;
        if (kind == 1) {
          std::set<double> picked;
          for (int tries = 0; tries < 2000 && picked.size() < 200; ++tries) {
            const double x = values[rng() % values.size()];
            if (std::isfinite(x)) picked.insert(x);
          }
          edges.assign(picked.begin(), picked.end());
          if (edges.size() < 2) edges = {lo, hi};
        }
        const tm_histogram_params_v1 params{static_cast<uint32_t>(edges.size() - 1), edges.data()};
        std::vector<uint64_t> v(edges.size() + 1, 0), c(edges.size() + 1, 0);
        run("vulkan", TM_OP_STATS_HISTOGRAM, dt, data, &params, sizeof params, &v);
        run("cpu", TM_OP_STATS_HISTOGRAM, dt, data, &params, sizeof params, &c);
        EXPECT_EQ(v, c) << dtype_name(dt) << " n=" << n << " edges kind " << kind;
        if (HasFailure()) return;
      }
    }
  }
}

TEST_F(VulkanParity, BitPatternCountsEqual) {
  ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", "65536");
  for (DType dt : dtypes_of(TM_OP_STATS_BITPATTERN_HISTOGRAM)) {
    for (uint64_t n : sizes()) {
      const auto data = test::salted_data(dt, n, n * 3 + 1);
      std::vector<uint64_t> v(size_t{1} << (8 * dtype_size(dt)), 0), c(v.size(), 0);
      run("vulkan", TM_OP_STATS_BITPATTERN_HISTOGRAM, dt, data, nullptr, 0, &v);
      run("cpu", TM_OP_STATS_BITPATTERN_HISTOGRAM, dt, data, nullptr, 0, &c);
      EXPECT_EQ(v, c) << dtype_name(dt) << " n=" << n;
    }
  }
}

TEST_F(VulkanParity, QuantilesEqualTheCpuSelection) {
  const std::vector<double> probabilities = {0, 1e-6, 0.001, 0.01, 0.25, 0.5, 0.75, 0.99, 0.999, 1 - 1e-6, 1};
  for (const std::string chunk : {"", "65536"}) {
    ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", chunk);
    for (DType dt : dtypes_of(TM_OP_STATS_QUANTILES)) {
      for (uint64_t n : sizes()) {
        for (int variant = 0; variant < 2; ++variant) {
          auto data = variant == 0 ? test::salted_data(dt, n, n * 11 + 2) : offset_data(dt, n, n * 13 + 9);
          if (variant == 1 && dt != DType::F32)  // many ties: a few distinct values
            for (size_t i = 0; i < data.size(); ++i) data[i] = (i % 4 == 0) ? static_cast<uint8_t>(i / 4 % 3) : 0;
          const tm_quantiles_params_v1 params{static_cast<uint32_t>(probabilities.size()), probabilities.data(), 0};
          std::vector<tm_quantile_value_v1> v(probabilities.size()), c(probabilities.size());
          run("vulkan", TM_OP_STATS_QUANTILES, dt, data, &params, sizeof params, &v);
          run("cpu", TM_OP_STATS_QUANTILES, dt, data, &params, sizeof params, &c);
          for (size_t q = 0; q < probabilities.size(); ++q) {
            const std::string where = std::string(dtype_name(dt)) + " n=" + std::to_string(n) + " p=" +
                                      std::to_string(probabilities[q]) + " chunk '" + chunk + "'";
            if (std::isnan(c[q].value)) EXPECT_TRUE(std::isnan(v[q].value)) << where;
            else EXPECT_EQ(v[q].value, c[q].value) << where;
            EXPECT_EQ(v[q].lo, v[q].value) << where;
            EXPECT_EQ(v[q].hi, v[q].value) << where;
            EXPECT_EQ(v[q].sample_size, c[q].sample_size) << where;
          }
          if (HasFailure()) return;
        }
      }
    }
  }
}

TEST_F(VulkanParity, AllNonFiniteInputHasNoQuantilesAndEmptyMoments) {
  std::vector<uint8_t> data(1000 * 4);
  for (size_t i = 0; i < 1000; ++i) {
    const uint32_t bits = i % 2 ? 0x7FC00000u : 0xFF800000u;  // NaN, -Inf
    std::memcpy(data.data() + i * 4, &bits, 4);
  }
  const std::vector<double> p = {0.5};
  const tm_quantiles_params_v1 params{1, p.data(), 0};
  std::vector<tm_quantile_value_v1> q(1);
  run("vulkan", TM_OP_STATS_QUANTILES, DType::F32, data, &params, sizeof params, &q);
  EXPECT_TRUE(std::isnan(q[0].value));
  EXPECT_EQ(q[0].sample_size, 0u);
  std::vector<tm_moments_partial_v1> v(1), c(1);
  run("vulkan", TM_OP_STATS_MOMENTS, DType::F32, data, nullptr, 0, &v);
  run("cpu", TM_OP_STATS_MOMENTS, DType::F32, data, nullptr, 0, &c);
  test::expect_same_partial(v[0], c[0], "all non-finite");
}

// Q4_0 and Q8_0 decode on Vulkan to the CPU's (ggml's) floats bit for bit, scales of every class
// included (subnormal, zero, ±Inf, NaN halves), across launch chunks.
TEST_F(VulkanParity, DequantizeQ4_0AndQ8_0BitIdentical) {
  ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", "4096");  // 32 blocks of output per launch
  std::mt19937_64 rng(77);
  const uint16_t special_scales[] = {0x0001, 0x03FF, 0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0x3C00, 0xBC00};
  for (uint32_t type : {2u, 8u}) {
    const size_t block_bytes = type == 8 ? 34 : 18;
    for (uint64_t blocks : {uint64_t{1}, uint64_t{33}, uint64_t{1000}}) {
      std::vector<uint8_t> data(blocks * block_bytes);
      for (auto& b : data) b = static_cast<uint8_t>(rng());
      for (uint64_t k = 0; k < blocks; ++k) {
        uint16_t d = static_cast<uint16_t>(rng());
        if (k % 3 == 0) d = special_scales[(k / 3) % 9];
        std::memcpy(&data[k * block_bytes], &d, 2);
      }
      const tm_dequantize_ggml_params_v1 params{type, 0};
      std::vector<float> v(blocks * 32), c(blocks * 32);
      for (const std::string backend : {"vulkan", "cpu"}) {
        Constraints pin;
        pin.strict_backend = backend;
        OpRequest r;
        r.op = TM_OP_DEQUANTIZE_GGML, r.dtype = DType::F32, r.elements = blocks * 32, r.bytes = data.size();
        r.format_id = type, r.format_name = type == 8 ? "Q8_0" : "Q4_0";
        const Placement p = Planner(*registry_, costs_, pin).place(r);
        tm_kernel_call_v1 call{};
        call.struct_size = sizeof call;
        call.op = TM_OP_DEQUANTIZE_GGML;
        call.kernel_index = p.kernel_index;
        call.dtype = TM_DTYPE_F32;
        call.input = data.data();
        call.element_count = blocks * 32;
        call.params = &params;
        call.params_size = sizeof params;
        auto& out = backend == "vulkan" ? v : c;
        call.output = out.data();
        call.output_size = out.size() * sizeof(float);
        call.threads = 1;
        tm_message msg{};
        ASSERT_EQ(p.backend_ref->table->run(&call, &msg), TM_OK) << backend << ": " << msg.text;
      }
      for (size_t i = 0; i < v.size(); ++i) {
        if (std::isnan(c[i])) {  // NaN payloads are not part of the contract
          EXPECT_TRUE(std::isnan(v[i])) << "type " << type << " value " << i;
          continue;
        }
        uint32_t a, b;
        std::memcpy(&a, &v[i], 4), std::memcpy(&b, &c[i], 4);
        ASSERT_EQ(a, b) << "type " << type << " value " << i << ": " << v[i] << " vs " << c[i];
      }
    }
  }
}

}  // namespace
// stem.frame_sums: the same uint64 integers as the CPU for every frame dtype, pixel lists with runs that end
// at row ends, a CoM list, lists-only calls, and frames spread over several launches.
TEST_F(VulkanParity, StemFrameSumsEqualTheCpu) {
  ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", "65536");  // a few frames per launch
  const uint64_t rows = 40, cols = 33, pixels = rows * cols, frames = 37;
  std::vector<uint32_t> a, b;
  for (uint32_t i = 0; i < pixels; ++i) {
    if ((i / cols) % 3 == 0 && i % cols > 20) a.push_back(i);     // runs to the row end
    if (i % 7 == 0 || (i > 600 && i < 700)) b.push_back(i);       // singles and a run across rows
  }
  std::vector<uint64_t> offsets = {0, a.size(), a.size() + b.size()};
  std::vector<uint32_t> lists(a);
  lists.insert(lists.end(), b.begin(), b.end());
  ASSERT_EQ(dtypes_of(TM_OP_STEM_FRAME_SUMS).size(), 3u);  // u8, u16, u32
  for (DType dt : dtypes_of(TM_OP_STEM_FRAME_SUMS))
    for (const uint32_t com_list : {TM_STEM_ALL_PIXELS, 1u})
      for (const uint32_t flags : {0u, TM_STEM_LISTS_ONLY}) {
        std::vector<uint8_t> data = test::salted_data(dt, frames * pixels, 11 + flags + com_list % 7);
        const tm_stem_frame_sums_params_v1 params{pixels, static_cast<uint32_t>(cols), 2, offsets.data(), lists.data(), com_list, flags};
        std::vector<uint64_t> v(frames * 6, 1), c(frames * 6, 2);
        run("vulkan", TM_OP_STEM_FRAME_SUMS, dt, data, &params, sizeof params, &v);
        run("cpu", TM_OP_STEM_FRAME_SUMS, dt, data, &params, sizeof params, &c);
        ASSERT_EQ(v, c) << dtype_name(dt) << " com_list " << com_list << " flags " << flags;
      }
}

namespace {

std::vector<uint8_t> f64_bytes(const std::vector<double>& v) {
  std::vector<uint8_t> b(v.size() * 8);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace

// display.colorize: for every golden case and colour map, the Vulkan op's RGBA bytes and histogram are the
// goldens (numpy + matplotlib); then large mixed tiles spread over several launches equal the CPU op.
TEST_F(VulkanParity, DisplayColorizeEqualsTheCpuGoldens) {
  ASSERT_EQ(dtypes_of(TM_OP_DISPLAY_COLORIZE), std::vector<DType>{DType::F64});
  const nlohmann::json cases = test::load_display_golden("cases")["cases"];
  ASSERT_GE(cases.size(), 10u);
  for (std::string_view map : colormap_names()) {
    const nlohmann::json golden = test::load_display_golden(std::string(map));
    for (size_t ci = 0; ci < cases.size(); ++ci) {
      const nlohmann::json& c = cases[ci];
      const nlohmann::json& g = golden["cases"][ci];
      const std::string where = std::string(map) + " / " + c["name"].get<std::string>();
      const std::vector<double> v = test::golden_values(c);
      if (v.empty()) continue;  // a call with no elements runs nothing
      const DisplayParams p = resolve_params(v.data(), v.size(), test::golden_request(c, map));
      const tm_display_colorize_params_v1 params = colorize_params(p);
      std::vector<uint8_t> out(TM_DISPLAY_COLORIZE_COUNTS * 8 + 4 * v.size(), 0);
      run("vulkan", TM_OP_DISPLAY_COLORIZE, DType::F64, f64_bytes(v), &params, sizeof params, &out);
      const std::string got = test::hex_bytes(out.data() + TM_DISPLAY_COLORIZE_COUNTS * 8, 4 * v.size());
      EXPECT_EQ(got, g["rgba"].get<std::string>()) << where;
      std::vector<uint64_t> counts(TM_DISPLAY_COLORIZE_COUNTS), want(TM_DISPLAY_COLORIZE_COUNTS, 0);
      std::memcpy(counts.data(), out.data(), TM_DISPLAY_COLORIZE_COUNTS * 8);
      for (const auto& bc : g["histogram"]["bins"]) want.at(bc[0].get<size_t>()) = bc[1].get<uint64_t>();
      want[256] = g["histogram"]["nan"].get<uint64_t>();
      want[257] = g["histogram"]["pos_inf"].get<uint64_t>();
      want[258] = g["histogram"]["neg_inf"].get<uint64_t>();
      EXPECT_EQ(counts, want) << where;
      if (HasFailure()) return;
    }
  }

  ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", "65536");  // 8,192 values per launch
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 3.0);
  std::vector<double> v(5 * 8192 + 333);
  for (double& x : v) {
    const uint64_t r = rng() % 500;
    x = r == 0 ? NAN : r == 1 ? INFINITY : r == 2 ? -INFINITY : r == 3 ? -0.0 : r < 8 ? std::ldexp(normal(rng), -1070) : normal(rng);
  }
  const std::vector<uint8_t> data = f64_bytes(v);
  struct Case { Transform t; double lo, hi; };
  for (const Case& c : {Case{Transform::Linear, -2.0, 5.0}, Case{Transform::Linear, 1.0, 1.0}, Case{Transform::Log, 1e-3, 7.0},
                        Case{Transform::Log, 0.0, 0.0}, Case{Transform::SignedLog, -4.0, 4.0},
                        Case{Transform::Linear, -1.7e308, 1.7e308},
                        Case{Transform::Linear, -1e-321, 1e-321},  // subnormal limits and thresholds (no flushing)
                        Case{Transform::SignedLog, -2e-322, 3e-322}}) {
    DisplayParams p;
    p.transform = c.t, p.limits = Limits{c.lo, c.hi}, p.colormap = &colormap("turbo");
    const tm_display_colorize_params_v1 params = colorize_params(p);
    std::vector<uint8_t> vk(TM_DISPLAY_COLORIZE_COUNTS * 8 + 4 * v.size(), 0), cpu(vk.size(), 0);
    run("vulkan", TM_OP_DISPLAY_COLORIZE, DType::F64, data, &params, sizeof params, &vk);
    run("cpu", TM_OP_DISPLAY_COLORIZE, DType::F64, data, &params, sizeof params, &cpu);
    EXPECT_EQ(vk, cpu) << transform_name(c.t) << " [" << c.lo << ", " << c.hi << "]";
  }
}

// stem.compact_sums on Vulkan from a device copy uploaded once (the residency extension): the same integers as the CPU
// op over the same image and as the copy's own sums (uint16 and uint32 keys, pixel and radial order, fixed sums and
// lists only, a centre-of-mass list, several pages, positions in any order), called twice on one copy; the host-image
// path (a page copied per launch) gives the same.
TEST_F(VulkanParity, CompactSumsFromTheDeviceCopyEqualTheCpuOp) {
  for (const test::CompactShape& sh : test::compact_shapes()) {
    const test::CompactCase c = test::compact_case(sh.count, sh.rows, sh.cols, sh.dt, sh.density, sh.radial, 29);
    const CompactImage image = compact_image(*c.frames);
    const uint64_t bytes = image.size;
    const Placement on_vulkan = place("vulkan", TM_OP_STEM_COMPACT_SUMS, DType::U8, bytes);
    const Placement on_cpu = place("cpu", TM_OP_STEM_COMPACT_SUMS, DType::U8, bytes);
    std::string why;
    const std::unique_ptr<DeviceCopy> device = make_device_copy(*c.frames, on_vulkan, 0, &why);
    ASSERT_TRUE(device) << why;
    EXPECT_EQ(device->bytes, bytes);
    EXPECT_EQ(device->location.rfind("vulkan/", 0), 0u) << device->location;
    EXPECT_TRUE(device->serves(on_vulkan));
    EXPECT_FALSE(device->serves(on_cpu));
    for (const bool fixed : {true, false})
      for (const auto* com : {&c.com, static_cast<const std::vector<uint32_t>*>(nullptr)}) {
        const std::string what = std::to_string(sh.rows) + "x" + std::to_string(sh.cols) + (fixed ? " fixed" : " lists") + (com ? " com" : "");
        const auto want = c.frames->sums(c.detectors, com, fixed, c.positions, 2);
        test::expect_same_sums(want, compact_sums(on_cpu, *c.frames, nullptr, &image, c.detectors, com, fixed, c.positions, 2), "cpu " + what);
        for (int call = 0; call < 2; ++call)
          test::expect_same_sums(want, compact_sums(on_vulkan, *c.frames, device.get(), nullptr, c.detectors, com, fixed, c.positions, 2),
                                 "vulkan device copy " + what);
        test::expect_same_sums(want, compact_sums(on_vulkan, *c.frames, nullptr, &image, c.detectors, com, fixed, c.positions, 2),
                               "vulkan host image " + what);
      }
  }
}

TEST_F(VulkanParity, CompactSumsRefuseMalformedCallsNamingTheField) {
  const test::CompactCase c = test::compact_case(12, 13, 11, DType::U16, 0.4, false, 3);
  test::expect_malformed_calls_refused(place("vulkan", TM_OP_STEM_COMPACT_SUMS, DType::U8, 1 << 20), c);
}

}  // namespace tmorph::vulkan_test
