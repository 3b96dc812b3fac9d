// Tile latency from an index (bench/lod_bench.py runs it): for the largest dense tensor of a
// checkpoint, the time to (a) fetch one stored level-0 tile's statistics, (b) draw one level-0 tile
// (256 x 256 cells of one element, read from the values) to RGBA, (c) draw a whole stored level (one
// cell per tile) to RGBA, and (d) encode a drawn tile as PNG. Prints JSON with p50 / p99 in ms.
//
//   lod_tile_bench CHECKPOINT INDEX.sqlite [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "index/checkpoint_index.h"
#include "render/cell_image.h"
#include "render/tensors/cell_source.h"
#include "image/png_encoder.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/planner.h"

using namespace tmorph;
using Clock = std::chrono::steady_clock;

namespace {

struct Percentiles {
  double p50 = 0, p99 = 0, max = 0;
};

Percentiles percentiles(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  const auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))]; };
  return {at(0.5), at(0.99), ms.back()};
}

template <typename F>
Percentiles time_it(int repeats, F&& f) {
  std::vector<double> ms;
  for (int k = 0; k < repeats; ++k) {
    const auto t0 = Clock::now();
    f(k);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  return percentiles(ms);
}

void print(const char* name, const Percentiles& p, bool last = false) {
  std::printf("  \"%s\": {\"p50_ms\": %.4f, \"p99_ms\": %.4f, \"max_ms\": %.4f}%s\n", name, p.p50, p.p99, p.max, last ? "" : ",");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CHECKPOINT INDEX.sqlite [repeats]\n", argv[0]);
    return 2;
  }
  const int repeats = argc > 3 ? std::stoi(argv[3]) : 300;
  CheckpointIndex index(argv[1], argv[2]);
  BackendRegistry registry;
  registry.register_table(cpu::cpu_backend_table(), "static");
  CostModel costs;
  Constraints constraints;
  Planner planner(registry, costs, constraints);
  size_t best = 0;
  uint64_t best_elements = 0;
  for (size_t i = 0; i < index.checkpoint().tensors.size(); ++i) {
    const auto& t = index.checkpoint().tensors[i];
    if (t.dtype && t.elements > best_elements && index.load_pyramid_info(i)) best = i, best_elements = t.elements;
  }
  if (best_elements == 0) {
    std::fprintf(stderr, "no tensor with a stored pyramid: index the checkpoint first\n");
    return 1;
  }
  const auto info = *index.load_pyramid_info(best);
  const auto& g0 = info.layout.levels[0];
  std::mt19937_64 rng(1);
  const auto random_tile = [&] { return std::pair<uint64_t, uint64_t>{rng() % g0.cols, rng() % g0.rows}; };

  const Percentiles fetch = time_it(repeats, [&](int) {
    const auto [x, y] = random_tile();
    if (!index.load_tile(best, info, 0, 0, y, x)) std::abort();
  });
  CellImage last;
  DisplayRequest display;
  display.colormap = "viridis";
  const Percentiles draw = time_it(repeats, [&](int) {
    SourceRequest req;
    req.level = 0;
    req.tile = random_tile();
    const CellSource s = cells_for(index, best, planner, req);
    last = render_cells(s.grid, CellStat::Mean, display, planner);
  });
  const Percentiles level = time_it(std::max(5, repeats / 20), [&](int) {
    SourceRequest req;
    req.level = 0;
    const CellSource s = cells_for(index, best, planner, req);
    render_cells(s.grid, CellStat::Envelope, display, planner);
  });
  const std::string png = "/tmp/lod_tile_bench.png";
  const Percentiles encode = time_it(std::max(5, repeats / 5), [&](int) { write_png(png, last.image, {}); });
  std::remove(png.c_str());
  const auto& t = index.checkpoint().tensors[best];
  std::printf("{\n  \"tensor\": \"%s\", \"elements\": %llu, \"level0_tiles\": %llu,\n", t.name.c_str(),
              static_cast<unsigned long long>(t.elements), static_cast<unsigned long long>(g0.rows * g0.cols));
  print("fetch_stored_tile", fetch);
  print("draw_level0_tile_from_values", draw);
  print("draw_whole_level0_from_index", level);
  print("encode_tile_png", encode, true);
  std::printf("}\n");
  return 0;
}
