#include "ops/tile_stats.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/kernel_call.h"
#include "ops/split_run.h"
#include "tensormorph/error.h"

namespace tmorph {

PlacedTileStats::PlacedTileStats(const Planner& planner, DType dtype, uint64_t elements, uint64_t memory_budget_bytes,
                                 unsigned threads)
    : threads_(threads ? threads : 1) {
  OpRequest r;
  r.op = TM_OP_LOD_TILE_STATS;
  r.dtype = dtype;
  r.elements = elements;
  r.bytes = elements * dtype_size(dtype);
  r.memory_budget_bytes = memory_budget_bytes;
  placement_ = std::make_shared<Placement>(planner.place(r));
  if (!placement_->split.empty()) split_run_ = std::make_shared<SplitRun>();
}

void PlacedTileStats::operator()(DType dtype, const tm_tile_stats_params_v1& params, const void* input, uint64_t elements,
                                 tm_tile_stats_v1* out, uint64_t tiles) const {
  if (split_run_) return run_split(dtype, params, input, out, tiles);
  run_placed_kernel(*placement_, TM_OP_LOD_TILE_STATS,
                    {dtype, input, elements, &params, sizeof params, out, tiles * sizeof(tm_tile_stats_v1), threads_});
}

// Tiles [t0, t1) of the band on a share: their columns of every row (gathered when the band has several rows,
// a run of the one row otherwise), the call's pattern counts added to the share's own (and those to the caller's
// once every share is done, so no two threads add to the same counts, and a failed call's counts are dropped).
void PlacedTileStats::run_split(DType dtype, const tm_tile_stats_params_v1& params, const void* input, tm_tile_stats_v1* out,
                                uint64_t tiles) const {
  const size_t width = dtype_size(dtype);
  const size_t patterns = params.pattern_counts ? size_t{1} << (8 * width) : 0;
  std::vector<std::vector<uint64_t>> counts(placement_->split.size(), std::vector<uint64_t>(patterns, 0));
  const auto* band = static_cast<const uint8_t*>(input);
  split_run_->call(placement_->split, tiles, [&](size_t i, uint64_t t0, uint64_t t1, uint64_t* bytes) -> std::string {
    const uint64_t c0 = t0 * params.tile_cols, c1 = std::min<uint64_t>(params.cols, t1 * params.tile_cols), w = c1 - c0;
    std::vector<uint8_t> gathered;
    const uint8_t* part = band + c0 * width;
    if (params.rows > 1 && w != params.cols) {
      gathered.resize(params.rows * w * width);
      for (uint64_t r = 0; r < params.rows; ++r)
        std::memcpy(gathered.data() + r * w * width, band + (r * params.cols + c0) * width, w * width);
      part = gathered.data();
    }
    std::vector<uint64_t> mine(patterns, 0);  // kept only when the call succeeds
    const tm_tile_stats_params_v1 p{params.rows, w, params.tile_cols, params.method, patterns ? mine.data() : nullptr};
    try {
      run_placed_kernel(placement_->split[i].placement, TM_OP_LOD_TILE_STATS,
                        {dtype, part, params.rows * w, &p, sizeof p, out + t0, (t1 - t0) * sizeof(tm_tile_stats_v1), threads_});
    } catch (const Error& e) {
      return e.what();
    }
    for (size_t k = 0; k < patterns; ++k) counts[i][k] += mine[k];
    *bytes = params.rows * w * width;
    return {};
  }, "lod.tile_stats");
  for (const auto& c : counts)
    for (size_t k = 0; k < patterns; ++k) params.pattern_counts[k] += c[k];
}

}  // namespace tmorph
