// One row per op of the plugin ABI (include/tensormorph/plugin_abi.h's tm_op): its name, the size of its
// params struct (op_contracts.h), how a kernel self-test builds its known-answer case, and the call a
// calibration times. Adding an op is its contract, one row here and its kernels: the op's name, self-test and
// calibration follow from the row, and the table is checked at compile time against TM_OP_COUNT_ (one row per
// op, in the enum's order).
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

#include "compute/calibration_calls.h"
#include "compute/known_answer.h"
#include "tensormorph/plugin_abi.h"

namespace tmorph {

struct OpDescriptor {
  tm_op id = TM_OP_INVALID;
  std::string_view name;       // "stats.moments": placements, reports, calibration files, the parity matrix
  size_t params_size = 0;      // sizeof the op's params struct (0: it takes none)
  // Fills a known-answer case; nullptr: the op has none yet (its kernels are reported as not self-tested).
  bool (*known_answer)(KnownAnswerCase& k, const OpRequest& req, uint64_t seed) = nullptr;
  CalibrationBuilder calibration_call = nullptr;
};

// Every op's row, in tm_op order (row i is op i + 1).
std::span<const OpDescriptor> op_table();
// The row of `op`; nullptr for TM_OP_INVALID and for ids past the table (an op a newer plugin names).
const OpDescriptor* find_op(tm_op op);

}  // namespace tmorph
