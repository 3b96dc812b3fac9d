#include "ops/tile_stats.h"

#include "ops/kernel_call.h"

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
  placement_ = planner.place(r);
}

void PlacedTileStats::operator()(DType dtype, const tm_tile_stats_params_v1& params, const void* input, uint64_t elements,
                                 tm_tile_stats_v1* out, uint64_t tiles) const {
  run_placed_kernel(placement_, TM_OP_LOD_TILE_STATS,
                    {dtype, input, elements, &params, sizeof params, out, tiles * sizeof(tm_tile_stats_v1), threads_});
}

}  // namespace tmorph
