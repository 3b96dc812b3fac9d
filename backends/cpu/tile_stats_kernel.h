// The CPU backend's TM_OP_LOD_TILE_STATS kernel (op_contracts.h): the reference. Each method is its own
// file (pattern_tiles.h, tile_kernels.h, widened_tiles.h); this one checks the call and walks the tiles.
#pragma once

#include <string>

#include "tensormorph/plugin_abi.h"

namespace tmorph::cpu {

// Why the call breaks the contract (empty when it does not): params, geometry, sizes, method for dtype.
std::string tile_stats_call_problem(const tm_kernel_call_v1& c);

// Runs a call tile_stats_call_problem accepted, tile after tile on the calling thread.
void tile_stats(const tm_kernel_call_v1& c);

}  // namespace tmorph::cpu
