// The placed TM_OP_LOD_TILE_STATS (op_contracts.h): level-0 pyramid tiles wherever the planner puts them.
// Placed once per tensor (the planner keeps small tensors on the linked CPU backend without opening a plugin),
// then every call of the tensor runs there.
#pragma once

#include <cstdint>

#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/placement.h"
#include "tensormorph/planner.h"

namespace tmorph {

class PlacedTileStats {
 public:
  // A tensor of `elements` elements of dtype; memory_budget_bytes as OpRequest's (0: unlimited). Throws what
  // the planner throws when no backend may run the op (e.g. a --backend without the kernel).
  PlacedTileStats(const Planner& planner, DType dtype, uint64_t elements, uint64_t memory_budget_bytes, unsigned threads);

  // lod's TileStatsKernel: one call on the placed backend; throws Error naming the backend on failure.
  void operator()(DType dtype, const tm_tile_stats_params_v1& params, const void* input, uint64_t elements,
                  tm_tile_stats_v1* out, uint64_t tiles) const;

  const Placement& placement() const { return placement_; }

 private:
  Placement placement_;
  unsigned threads_;
};

}  // namespace tmorph
