// display.colorize placed through the planner: the colours and 256-bin histogram of one tile of float64
// values on whichever backend the planner picks (CPU reference, Vulkan, ...), byte-identical to the CPU
// reference kernels (colorize() and histogram256() of display_kernels.h) on every backend.
//
// The host builds the op's parameters (thresholds.h: 255 data-space thresholds from the reference
// Normalizer, the key mode, the colour table); the kernel compares float64 values only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "display/display_kernels.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/placement.h"
#include "tensormorph/planner.h"

namespace tmorph {

struct ColorizeResult {
  std::vector<uint8_t> rgba;    // 4 bytes per value (R, G, B, A), as colorize() writes them
  DisplayHistogram histogram;   // as histogram256() counts them
  Placement placement;          // where TM_OP_DISPLAY_COLORIZE ran, and why
};

// The op's parameters for p: thresholds of (limits, transform, log floor), key mode, p.colormap's table.
// Throws Error(InvalidArgument) for invalid limits or a missing colour map.
tm_display_colorize_params_v1 colorize_params(const DisplayParams& p);

// Places TM_OP_DISPLAY_COLORIZE (F64, n values, input on the host) with `planner` and runs it on
// `threads` host threads (a CPU kernel's share). Throws like colorize_params, the planner's Error when no
// backend can take the op, and a kernel failure as Error.
ColorizeResult colorize_placed(const Planner& planner, const double* v, size_t n, const DisplayParams& p,
                               unsigned threads = 1);

}  // namespace tmorph
