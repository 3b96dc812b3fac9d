#include "ops/diff_tiles.h"

#include "ops/kernel_call.h"

namespace tmorph {

PlacedDiffTiles::PlacedDiffTiles(const Planner& planner, uint64_t pairs) {
  OpRequest r;
  r.op = TM_OP_DIFF_TILE_STATS;
  r.dtype = DType::F64;
  r.elements = pairs;
  r.bytes = pairs * 16;  // both sides' float64 values
  placement_ = planner.place(r);
}

void PlacedDiffTiles::add(const double* a, const double* b, uint64_t rows, uint64_t cols, uint64_t tile_cols,
                          tm_diff_tile_v1* tiles) const {
  const tm_diff_tile_params_v1 params{b, rows, cols, tile_cols};
  const uint64_t count = (cols + tile_cols - 1) / tile_cols;
  run_placed_kernel(placement_, TM_OP_DIFF_TILE_STATS,
                    {DType::F64, a, rows * cols, &params, sizeof params, tiles, count * sizeof(tm_diff_tile_v1), 1});
}

}  // namespace tmorph
