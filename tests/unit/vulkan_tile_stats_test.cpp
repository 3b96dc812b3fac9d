// Parity of the Vulkan lod.tile_stats kernel with the CPU reference (op_contracts.h: TM_OP_LOD_TILE_STATS),
// through the real plugin on the real driver (Mesa lavapipe in CI): every tile record byte for byte and the
// pattern counts, for every dtype the kernel takes and every method a pyramid asks of it, over salted data
// (NaN, +-Inf, +-0, subnormals), data whose mean dwarfs its spread, 16-bit floats whose first value lies far from
// the rest (the pattern scan's second pass), first rows finite only at a tile's end, short edge tiles, one-row bands, and
// launches split by small chunks (the host gathers the tiles' columns); then whole pyramids placed on Vulkan
// against the CPU's, and the dtypes Vulkan does not take placed on the CPU with the reason.
#include "vulkan_fixture.h"

#include "lod/pyramid.h"
#include "ops/tile_stats.h"
#include "tensormorph/contract_math.h"

namespace tmorph::vulkan_test {
namespace {

struct Band {
  uint64_t rows, cols;
  uint32_t tile_cols;
};

// Bands of whole pyramid tile rows: 256 x 256 tiles with a short edge tile, one-row bands of 65,536-wide
// tiles (a vector), a band shorter than its tiles, and a single element.
const Band kBands[] = {{256, 700, 256}, {1, 70001, 65536}, {3, 20000, 8192}, {1, 1, 65536}, {17, 300, 2048}};

// 16-bit floats near 1000 (16 neighbouring patterns) whose every tile's first value is -1000: the shift of the
// pattern scan lies far from the tile's mean, so its sums cancel and it sums again about the mean.
std::vector<uint8_t> far_shift_data(DType dt, const Band& b, uint64_t seed) {
  const uint16_t near = dt == DType::F16 ? 0x63D0 : 0x447A, far = near | 0x8000;  // 1000, -1000
  std::vector<uint8_t> raw(b.rows * b.cols * 2);
  for (uint64_t i = 0; i < b.rows * b.cols; ++i) {
    const bool first_of_tile = i < b.cols && i % b.tile_cols == 0;
    const uint16_t v = first_of_tile ? far : static_cast<uint16_t>(near + (i * 2654435761u + seed) % 16);
    std::memcpy(raw.data() + 2 * i, &v, 2);
  }
  return raw;
}

// Salted data whose first row holds no finite float before each tile's last column (all-ones patterns: NaN in
// every float format, finite integers): a tile's shift is found at the end of a row of up to 65,536 elements.
std::vector<uint8_t> late_finite_data(DType dt, const Band& b, uint64_t seed) {
  std::vector<uint8_t> raw = test::salted_data(dt, b.rows * b.cols, seed);
  const size_t w = dtype_size(dt);
  for (uint64_t c = 0; c < b.cols; ++c)
    if ((c + 1) % b.tile_cols != 0 && c + 1 != b.cols) std::memset(raw.data() + c * w, 0xFF, w);
  return raw;
}

std::vector<uint32_t> methods_of(DType dt) {
  std::vector<uint32_t> m = {TM_TILE_WIDENED};
  if (tile_stats_method_takes(TM_TILE_PATTERNS, static_cast<uint32_t>(dt))) m.push_back(TM_TILE_PATTERNS);
  if (tile_stats_method_takes(TM_TILE_SEGMENTS, static_cast<uint32_t>(dt))) m.push_back(TM_TILE_SEGMENTS);
  return m;
}

TEST_F(VulkanParity, TileStatsBitIdenticalForEveryDtypeBandAndMethod) {
  const std::vector<DType> dtypes = dtypes_of(TM_OP_LOD_TILE_STATS);
  ASSERT_FALSE(dtypes.empty());
  for (const std::string chunk : {"", "65536"}) {  // default chunks, then launches of a few tiles' columns
    ScopedEnv env("TENSORMORPH_VULKAN_CHUNK_BYTES", chunk);
    for (DType dt : dtypes) {
      for (const Band& b : kBands) {
        for (uint32_t method : methods_of(dt)) {
          for (int variant = 0; variant < 4; ++variant) {
            if (variant == 2 && dt != DType::BF16 && dt != DType::F16) continue;
            const uint64_t n = b.rows * b.cols, seed = n * 13 + b.tile_cols + variant;
            const auto data = variant == 0   ? test::salted_data(dt, n, seed)
                              : variant == 1 ? offset_data(dt, n, seed)
                              : variant == 2 ? far_shift_data(dt, b, seed)
                                             : late_finite_data(dt, b, seed);
            const uint64_t tiles = (b.cols + b.tile_cols - 1) / b.tile_cols;
            const size_t patterns = method == TM_TILE_PATTERNS ? size_t{1} << (8 * dtype_size(dt)) : 0;
            std::vector<uint64_t> vp(patterns, 0), cp(patterns, 0);
            tm_tile_stats_params_v1 pv{b.rows, b.cols, b.tile_cols, method, patterns ? vp.data() : nullptr};
            tm_tile_stats_params_v1 pc{b.rows, b.cols, b.tile_cols, method, patterns ? cp.data() : nullptr};
            std::vector<tm_tile_stats_v1> v(tiles), c(tiles);
            run("vulkan", TM_OP_LOD_TILE_STATS, dt, data, &pv, sizeof pv, &v);
            run("cpu", TM_OP_LOD_TILE_STATS, dt, data, &pc, sizeof pc, &c);
            const std::string where = std::string(dtype_name(dt)) + " " + std::to_string(b.rows) + "x" + std::to_string(b.cols) +
                                      " tiles " + std::to_string(b.tile_cols) + " method " + std::to_string(method) +
                                      " variant " + std::to_string(variant) + " chunk '" + chunk + "'";
            for (uint64_t t = 0; t < tiles; ++t) {
              EXPECT_EQ(std::memcmp(&v[t], &c[t], sizeof v[t]), 0)
                  << where << " tile " << t << ": count " << v[t].count << "/" << c[t].count << " sum " << v[t].sum << "/"
                  << c[t].sum << " m2 " << v[t].m2 << "/" << c[t].m2 << " min " << v[t].min << "/" << c[t].min;
            }
            if (method == TM_TILE_PATTERNS) {
              EXPECT_EQ(vp, cp) << where << ": pattern counts";
            }
            if (HasFailure()) return;
          }
        }
      }
    }
  }
}

TEST_F(VulkanParity, TileStatsPyramidsPlacedOnVulkanEqualTheCpus) {
  Constraints strict;
  strict.strict_backend = "vulkan";
  const Planner on_vulkan(*registry_, costs_, strict), on_cpu(*registry_, costs_, Constraints{{}, {}, {"vulkan"}});
  for (DType dt : dtypes_of(TM_OP_LOD_TILE_STATS)) {
    const std::vector<uint64_t> shape = {2, 300, 700};
    const uint64_t n = 2 * 300 * 700;
    const auto data = test::salted_data(dt, n, 99);
    const View2D view = default_view(shape);
    const PlacedTileStats vk(on_vulkan, dt, n, 0, 1), cpu(on_cpu, dt, n, 0, 1);
    EXPECT_EQ(vk.placement().backend, "vulkan");
    EXPECT_EQ(cpu.placement().backend, "cpu");
    // Fed in odd pieces on Vulkan (bands copied), at once on the CPU.
    PyramidBuilder pieces(dt, view, vk);
    test::feed_in_odd_pieces(data.data(), n, dtype_size(dt), 50000, [&](const uint8_t* p, uint64_t k) { pieces.feed(p, k); });
    const Pyramid a = pieces.finish(), b = build_pyramid(dt, view, data.data(), cpu);
    ASSERT_EQ(a.tiles.size(), b.tiles.size());
    EXPECT_EQ(a.edges, b.edges) << dtype_name(dt);
    for (size_t t = 0; t < a.tiles.size(); ++t) EXPECT_EQ(encode_tile(a.tiles[t]), encode_tile(b.tiles[t])) << dtype_name(dt) << " tile " << t;
    if (HasFailure()) return;
  }
}

TEST_F(VulkanParity, TileStatsOfDtypesWithoutAVulkanKernelArePlacedOnTheCpuWithTheReason) {
  // f64, i64 and u64 have no Vulkan kernel (as for every Vulkan op): a big tensor (past the plugin-opening
  // threshold) is placed on the CPU, the Vulkan rejection named; --backend vulkan refuses.
  for (DType dt : {DType::F64, DType::I64, DType::U64}) {
    const uint64_t n = uint64_t{64} << 20;
    const PlacedTileStats placed(Planner(*registry_, costs_, Constraints{}), dt, n, 0, 1);
    EXPECT_EQ(placed.placement().backend, "cpu") << dtype_name(dt);
    bool named = false;
    for (const Rejection& r : placed.placement().rejected) named |= r.backend == "vulkan";
    EXPECT_TRUE(named) << dtype_name(dt) << ": the Vulkan rejection is not reported";
    EXPECT_THROW(place("vulkan", TM_OP_LOD_TILE_STATS, dt, n), Error) << dtype_name(dt);
  }
}

}  // namespace
}  // namespace tmorph::vulkan_test
