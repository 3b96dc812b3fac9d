// Compute cost of building a statistics pyramid beside the indexing statistics on the same resident
// data (bench/lod_bench.py runs it): a 4096 x 8192 matrix of normal weights (bf16, or the dtype named by
// the first argument: f16, f32) fed in 4 MiB pieces, as indexing feeds it, to StatsStream alone and to
// PyramidBuilder alone, and to both as indexing runs them (the statistics taking the pyramid's bit-pattern
// counts), one thread. Prints JSON with bytes per second of each (best of 5).
#include <algorithm>
#include <bit>
#include <string>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/cpu_backend.h"
#include "index/checkpoint_index.h"
#include "lod/pyramid.h"
#include "ops/tile_stats.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/planner.h"
#include "tensormorph/stats.h"

using namespace tmorph;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "bf16";
  const DType dtype = name == "f32" ? DType::F32 : name == "f16" ? DType::F16 : DType::BF16;
  const size_t width = dtype_size(dtype);
  const uint64_t rows = 4096, cols = 8192, n = rows * cols, piece = (4u << 20) / width;
  std::vector<uint8_t> data(n * width);
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (uint64_t i = 0; i < n; ++i) {
    const float f = normal(rng);
    const _Float16 h = static_cast<_Float16>(f);
    const uint32_t b = std::bit_cast<uint32_t>(f);
    const uint16_t top = static_cast<uint16_t>(b >> 16);
    std::memcpy(&data[i * width], dtype == DType::F32 ? static_cast<const void*>(&f)
                                  : dtype == DType::F16 ? static_cast<const void*>(&h)
                                                        : static_cast<const void*>(&top), width);
  }
  BackendRegistry registry;
  registry.register_table(cpu::cpu_backend_table(), "static");
  CostModel costs;
  Planner planner(registry, costs, Constraints{});
  StatsOptions options = CheckpointIndex::index_options();
  options.threads = 1;
  const auto best_of = [](auto&& f) {
    double best = 1e30;
    for (int k = 0; k < 5; ++k) {
      const auto t0 = Clock::now();
      f();
      best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return best;
  };
  const double stats_s = best_of([&] {
    StatsStream s(planner, dtype, n, options);
    for (uint64_t off = 0; off < n; off += piece) s.feed(data.data() + off * width, std::min(piece, n - off));
    s.finish(data.data());
  });
  const double pyramid_s = best_of([&] {
    PyramidBuilder b(dtype, default_view({rows, cols}), PlacedTileStats(planner, dtype, n, 0, 1));
    for (uint64_t off = 0; off < n; off += piece) b.feed(data.data() + off * width, std::min(piece, n - off));
    b.finish();
  });
  // Both, as indexing runs them: pieces of whole bands, and the statistics take the pyramid's pattern
  // counts (8/16-bit dtypes) instead of counting them.
  const double both_s = best_of([&] {
    StatsStream s(planner, dtype, n, options);
    PyramidBuilder b(dtype, default_view({rows, cols}), PlacedTileStats(planner, dtype, n, 0, 1));
    const bool shared = b.pattern_counts() && s.count_patterns_elsewhere("counted_by_pyramid_pass");
    const uint64_t step = b.piece_elements(piece);
    for (uint64_t off = 0; off < n; off += step) {
      s.feed(data.data() + off * width, std::min(step, n - off));
      b.feed(data.data() + off * width, std::min(step, n - off));
    }
    if (shared) s.add_pattern_counts(*b.pattern_counts());
    b.finish();
    s.finish(data.data());
  });
  const double bytes = static_cast<double>(n) * width;
  std::printf("{\"bytes\": %.0f, \"stats_gb_per_s\": %.3f, \"pyramid_gb_per_s\": %.3f, \"pyramid_over_stats\": %.3f, "
              "\"stats_and_pyramid_gb_per_s\": %.3f, \"stats_rate_over_both_rate\": %.3f}\n",
              bytes, bytes / stats_s / 1e9, bytes / pyramid_s / 1e9, pyramid_s / stats_s, bytes / both_s / 1e9,
              stats_s / both_s);
  return 0;
}
