// The placed TM_OP_DIFF_TILE_STATS (op_contracts.h): level-0 difference-pyramid tiles of a tensor pair wherever
// the planner puts them. Placed once per pair; every call of the pair then runs there.
#pragma once

#include <cstdint>

#include "tensormorph/op_contracts.h"
#include "tensormorph/placement.h"
#include "tensormorph/planner.h"

namespace tmorph {

class PlacedDiffTiles {
 public:
  // A pair of `pairs` float64 values each. Throws what the planner throws when no backend may run the op (a
  // --backend without the kernel).
  PlacedDiffTiles(const Planner& planner, uint64_t pairs);

  // Adds rows x cols pairs (a and b row-major, float64) into tiles[0, ceil(cols / tile_cols)) on one thread of
  // the placed backend (the caller runs pieces in parallel); throws Error naming the backend on failure.
  void add(const double* a, const double* b, uint64_t rows, uint64_t cols, uint64_t tile_cols, tm_diff_tile_v1* tiles) const;

  const Placement& placement() const { return placement_; }

 private:
  Placement placement_;
};

}  // namespace tmorph
