// The placed TM_OP_LOD_TILE_STATS (op_contracts.h): level-0 pyramid tiles wherever the planner puts them.
// Placed once per tensor (the planner keeps small tensors on the linked CPU backend without opening a plugin),
// then every call of the tensor runs there; or, when the planner splits the op (Placement::split), each call's tiles
// are shared among the split's backends (ops/split_run.h), every tile computed by one of them with the method the
// caller named, so the records are the ones a single backend gives.
#pragma once

#include <cstdint>
#include <memory>

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

  // Where it ran; a split's shares carry what each computed so far (copies of this object, such as the pyramid
  // builder's kernel, count into the same placement).
  const Placement& placement() const { return *placement_; }

 private:
  void run_split(DType dtype, const tm_tile_stats_params_v1& params, const void* input, tm_tile_stats_v1* out,
                 uint64_t tiles) const;

  std::shared_ptr<Placement> placement_;  // shared by copies: a split's counters change with each call
  unsigned threads_;
  std::shared_ptr<class SplitRun> split_run_;
};

}  // namespace tmorph
