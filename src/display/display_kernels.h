// The CPU reference display kernels: values -> RGBA8 colours and a 256-bin histogram, over one tile.
//
// Contract (with transform.h and colormap.h):
// - Colour index k = min(floor(n * 256), 255) with n the normalised value; RGBA = the map's entry k.
//   NaN -> the invalid colour (0, 0, 0, 0). ±Inf -> the ends (index 255 / 0; under log both 255).
// - Histogram: 256 bins over the finite inputs with the same k (out-of-range finite values land in
//   bins 0 and 255; a collapsed range puts every finite value in bin 128). NaN, +Inf and -Inf are not
//   binned; their counts are reported apart.
// - Pure, single-threaded, no allocation beyond a small stack buffer; callers split large data into
//   tiles. Automatic limits must be resolved over the whole data (resolve_params, or auto_limits per tile
//   merged by min/max before centring) for tiles to agree.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "display/colormap.h"
#include "display/transform.h"

namespace tmorph {

struct DisplayParams {
  Transform transform = Transform::Linear;
  double log_floor = kDefaultLogFloor;  // log only; finite, > 0
  Limits limits;                        // data units; finite, lo <= hi, t(lo) <= t(hi)
  const Colormap* colormap = nullptr;   // required by colorize; histogram256 ignores it
};

// What a caller asks for; resolve_params turns it into DisplayParams for given data.
struct DisplayRequest {
  Transform transform = Transform::Linear;
  double log_floor = kDefaultLogFloor;
  std::optional<double> lo, hi;          // data units; a missing end is automatic (auto_limits)
  std::string_view colormap = "gray";    // a name known to colormap()
};

struct DisplayHistogram {
  std::array<uint64_t, 256> counts{};  // finite inputs per colour index
  uint64_t nan = 0, pos_inf = 0, neg_inf = 0;
  DisplayHistogram& operator+=(const DisplayHistogram& o);
};

// Looks up the colour map and fills the missing limits from auto_limits(v, n, transform, diverging) over
// the values; the diverging centring applies only when both ends are automatic. Throws
// Error(InvalidArgument) for an unknown map, a bad log floor, non-finite given limits, or resolved limits
// that are reversed (validate_limits).
DisplayParams resolve_params(const double* v, size_t n, const DisplayRequest& request);

// rgba_out[4*i .. 4*i+3] = the colour of v[i] (4 bytes per value, R, G, B, A). Throws
// Error(InvalidArgument) for invalid limits or a missing colour map.
void colorize(const double* v, size_t n, const DisplayParams& p, uint8_t* rgba_out);

// The 256-bin histogram of v[0..n) under p (p.colormap unused). Throws like validate_limits.
DisplayHistogram histogram256(const double* v, size_t n, const DisplayParams& p);

}  // namespace tmorph
