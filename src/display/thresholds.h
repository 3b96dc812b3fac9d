// Display colour thresholds: the contract of the display kernels (display_kernels.h) turned into 255
// float64 thresholds in DATA space, so that any backend reproduces the CPU reference colours with
// float64 comparisons only (GPUs cannot reproduce float64 log10 / log1p / division bit for bit).
//
// Contract:
// - The key of a value x is x (linear, signed-log) or |x| (log, whose t depends on |x| only).
// - The reference colour index of a finite x is k = min(floor(n * 256), 255) with n = Normalizer(x)
//   (transform.h); it is non-decreasing in the key.
// - thresholds[k - 1] (k = 1 .. 255) is the smallest finite float64 key whose reference index is >= k,
//   found by bisection over the ordered float64 bit patterns (-0 and +0 are one key); -Inf when the
//   lowest key of the domain (-DBL_MAX, or 0 for |x|) already reaches k, +Inf when no finite key does.
//   A collapsed range (t(hi) == t(lo), every finite index 128) gives -Inf for k <= 128, +Inf above.
// - For a finite x: reference index == the number of thresholds <= key(x). NaN and ±Inf keep their own
//   rules (invalid colour; +Inf key -> 255, -Inf key -> 0), which the kernels apply before the count.
#pragma once

#include <array>
#include <cstdint>

#include "display/display_kernels.h"
#include "display/transform.h"

namespace tmorph {

enum class ThresholdKey : uint32_t { Value = 0, Magnitude = 1 };  // == TM_DISPLAY_KEY_VALUE / _MAGNITUDE

struct ColorThresholds {
  ThresholdKey key = ThresholdKey::Value;
  std::array<double, 255> t{};  // non-decreasing; may hold -Inf / +Inf, never NaN
};

// The key mode of a transform: Magnitude for log, Value otherwise.
ThresholdKey threshold_key(Transform t);

// The reference colour index of x under nz: 0..255, or 256 for NaN (display_kernels.cpp's formula).
uint32_t reference_color_index(const Normalizer& nz, double x);

// The thresholds of (limits, transform, log floor). Validates like Normalizer (throws
// Error(InvalidArgument)). About 255 * 64 Normalizer evaluations.
ColorThresholds color_thresholds(const Limits& limits, Transform t, double log_floor);
inline ColorThresholds color_thresholds(const DisplayParams& p) { return color_thresholds(p.limits, p.transform, p.log_floor); }

// The colour index of x by thresholds, as the kernels compute it: 256 for NaN; key +Inf -> 255,
// key -Inf -> 0; otherwise the number of thresholds <= key (branch-free binary search).
uint32_t color_index_by_thresholds(const ColorThresholds& th, double x);

}  // namespace tmorph
