// Compute cost of building a statistics pyramid beside the indexing statistics on the same resident
// data (bench/lod_bench.py runs it): a 4096 x 8192 bf16 matrix of normal weights fed in 4 MiB pieces,
// as indexing feeds it, to StatsStream alone and to PyramidBuilder alone, one thread. Prints JSON with
// bytes per second of each (best of 5).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cpu/cpu_backend.h"
#include "index/checkpoint_index.h"
#include "lod/pyramid.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/planner.h"
#include "tensormorph/stats.h"

using namespace tmorph;
using Clock = std::chrono::steady_clock;

int main() {
  const uint64_t rows = 4096, cols = 8192, n = rows * cols, piece = (4u << 20) / 2;
  std::vector<uint16_t> data(n);
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  for (auto& v : data) {
    const float f = normal(rng);
    uint32_t b;
    std::memcpy(&b, &f, 4);
    v = static_cast<uint16_t>(b >> 16);
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
    StatsStream s(planner, DType::BF16, n, options);
    for (uint64_t off = 0; off < n; off += piece) s.feed(data.data() + off, std::min(piece, n - off));
    s.finish(nullptr);
  });
  const double pyramid_s = best_of([&] {
    PyramidBuilder b(DType::BF16, default_view({rows, cols}));
    for (uint64_t off = 0; off < n; off += piece) b.feed(data.data() + off, std::min(piece, n - off));
    b.finish();
  });
  const double bytes = static_cast<double>(n) * 2;
  std::printf("{\"bytes\": %.0f, \"stats_gb_per_s\": %.3f, \"pyramid_gb_per_s\": %.3f, \"pyramid_over_stats\": %.3f}\n", bytes,
              bytes / stats_s / 1e9, bytes / pyramid_s / 1e9, pyramid_s / stats_s);
  return 0;
}
