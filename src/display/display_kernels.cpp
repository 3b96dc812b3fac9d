#include "display/display_kernels.h"

#include <algorithm>
#include <cstring>

#include "tensormorph/error.h"

namespace tmorph {
namespace {

constexpr size_t kChunk = 1024;    // values per pass (index buffer on the stack)
constexpr uint16_t kInvalid = 256; // colour index of NaN

// k = min(floor(n * 256), 255), or kInvalid for NaN n (n in [0, 1] otherwise). Written as selects on
// doubles so that loops over it vectorise (tm_display builds with -fno-trapping-math, which lets GCC
// if-convert them; it changes no value).
inline uint16_t color_index(double n) {
  double q = n * 256.0;       // exact
  q = q > 255.0 ? 255.0 : q;  // min(floor(q), 255) == floor(min(q, 255))
  q = q == q ? q : double{kInvalid};
  return static_cast<uint16_t>(static_cast<int32_t>(q));
}

// Colour indices of v[0..n). Linear with a non-collapsed range is branch-free so that it vectorises:
// ±Inf give ±Inf before the clamp and NaN stays NaN, as Normalizer's explicit cases say. Everything else
// goes through Normalizer (one libm call per value dominates there).
void color_indices(const double* v, size_t n, const Normalizer& nz, uint16_t* idx) {
  if (nz.transform() == Transform::Linear && !nz.collapsed()) {
    const double s = nz.scale(), tlo = nz.tlo(), range = nz.range();
    for (size_t i = 0; i < n; ++i) {
      double m = (v[i] * s - tlo) / range;
      m = m < 0.0 ? 0.0 : m;
      m = m > 1.0 ? 1.0 : m;
      idx[i] = color_index(m);
    }
    return;
  }
  for (size_t i = 0; i < n; ++i) idx[i] = color_index(nz(v[i]));
}

}  // namespace

DisplayHistogram& DisplayHistogram::operator+=(const DisplayHistogram& o) {
  for (size_t k = 0; k < counts.size(); ++k) counts[k] += o.counts[k];
  nan += o.nan;
  pos_inf += o.pos_inf;
  neg_inf += o.neg_inf;
  return *this;
}

DisplayParams resolve_params(const double* v, size_t n, const DisplayRequest& request) {
  DisplayParams p;
  p.transform = request.transform;
  p.log_floor = request.log_floor;
  p.colormap = &colormap(request.colormap);
  if (request.lo && request.hi) {
    p.limits = Limits{*request.lo, *request.hi};
  } else {
    const bool centre = !request.lo && !request.hi && p.colormap->diverging;
    const Limits a = auto_limits(v, n, request.transform, centre);
    p.limits = Limits{request.lo.value_or(a.lo), request.hi.value_or(a.hi)};
  }
  validate_limits(p.limits, p.transform, p.log_floor);
  return p;
}

void colorize(const double* v, size_t n, const DisplayParams& p, uint8_t* rgba_out) {
  if (p.colormap == nullptr || p.colormap->rgba == nullptr)
    throw Error(ErrorKind::InvalidArgument, "colorize: no colour map given");
  const Normalizer nz(p.limits, p.transform, p.log_floor);
  uint32_t lut[257];  // the table's entries as 4-byte words, then the invalid colour
  for (size_t k = 0; k < 256; ++k) std::memcpy(&lut[k], p.colormap->rgba[k], 4);
  std::memcpy(&lut[kInvalid], kInvalidRgba, 4);
  uint16_t idx[kChunk];
  for (size_t base = 0; base < n; base += kChunk) {
    const size_t m = std::min(kChunk, n - base);
    color_indices(v + base, m, nz, idx);
    uint8_t* out = rgba_out + 4 * base;
    for (size_t i = 0; i < m; ++i) std::memcpy(out + 4 * i, &lut[idx[i]], 4);
  }
}

DisplayHistogram histogram256(const double* v, size_t n, const DisplayParams& p) {
  const Normalizer nz(p.limits, p.transform, p.log_floor);
  DisplayHistogram h;
  uint16_t idx[kChunk];
  for (size_t base = 0; base < n; base += kChunk) {
    const size_t m = std::min(kChunk, n - base);
    color_indices(v + base, m, nz, idx);
    for (size_t i = 0; i < m; ++i) {
      const double x = v[base + i];
      if (x != x) ++h.nan;
      else if (x == std::numeric_limits<double>::infinity()) ++h.pos_inf;
      else if (x == -std::numeric_limits<double>::infinity()) ++h.neg_inf;
      else ++h.counts[idx[i]];
    }
  }
  return h;
}

}  // namespace tmorph
