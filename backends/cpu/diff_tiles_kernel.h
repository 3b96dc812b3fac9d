// The CPU backend's TM_OP_DIFF_TILE_STATS kernel (op_contracts.h): the level-0 tiles of a difference pyramid,
// the reference. Finite segments run on Highway vectors (dynamic dispatch) in the contract's 8 lanes, whatever
// the CPU's vector width; a segment with a NaN or an infinity runs pair by pair. Rows are split across the
// call's threads only by tile columns, so each tile is added to by one thread.
#pragma once

#include <string>

#include "tensormorph/plugin_abi.h"

namespace tmorph::cpu {

tm_status run_diff_tile_stats(const tm_kernel_call_v1& call, std::string* error);

}  // namespace tmorph::cpu
