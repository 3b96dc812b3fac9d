// CPU reference kernels for TM_OP_STEM_FRAME_SUMS, TM_OP_STEM_PATTERN_REDUCE and TM_OP_STEM_COMPACT_SUMS
// (op_contracts.h).
#pragma once

#include <string>

#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

// Validates the call against the contract and runs it on call.threads threads (frames split between
// threads for frame sums, pixels for pattern reductions: every output is written by one thread, in a
// fixed order, so results do not depend on the thread count). Returns TM_OK or an error with *error set.
tm_status run_stem_frame_sums(const tm_kernel_call_v1& call, std::string* error);
tm_status run_stem_pattern_reduce(const tm_kernel_call_v1& call, std::string* error);
// Positions split between threads, each position's row written by one thread. A page whose words break the
// contract (counts, offsets or keys out of range) is refused naming the page and the field.
tm_status run_stem_compact_sums(const tm_kernel_call_v1& call, std::string* error);

}  // namespace tmorph::cpu
