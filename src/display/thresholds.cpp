#include "display/thresholds.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace tmorph {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMax = std::numeric_limits<double>::max();

// The position of a double among the ordered float64 bit patterns: -0 and +0 both map to 0.
int64_t ordinal(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  const int64_t mag = static_cast<int64_t>(b & 0x7FFFFFFFFFFFFFFFull);
  return (b >> 63) ? -mag : mag;
}

double from_ordinal(int64_t o) {
  const uint64_t b = o >= 0 ? static_cast<uint64_t>(o) : (uint64_t{1} << 63) | (uint64_t{0} - static_cast<uint64_t>(o));
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}

}  // namespace

ThresholdKey threshold_key(Transform t) { return t == Transform::Log ? ThresholdKey::Magnitude : ThresholdKey::Value; }

uint32_t reference_color_index(const Normalizer& nz, double x) {
  const double n = nz(x);
  if (n != n) return 256;
  double q = n * 256.0;
  q = q > 255.0 ? 255.0 : q;
  return static_cast<uint32_t>(static_cast<int32_t>(q));
}

ColorThresholds color_thresholds(const Limits& limits, Transform t, double log_floor) {
  const Normalizer nz(limits, t, log_floor);  // validates
  ColorThresholds th;
  th.key = threshold_key(t);
  const double lowest = th.key == ThresholdKey::Magnitude ? 0.0 : -kMax;
  const uint32_t k_lowest = reference_color_index(nz, lowest), k_highest = reference_color_index(nz, kMax);
  // The thresholds are non-decreasing: each search starts where the previous one ended.
  int64_t below = ordinal(lowest);  // a key whose index is < k (or the domain's lowest)
  for (uint32_t k = 1; k <= 255; ++k) {
    if (k_lowest >= k) {
      th.t[k - 1] = -kInf;
      continue;
    }
    if (k_highest < k) {
      th.t[k - 1] = kInf;
      continue;
    }
    // Invariant: index(lo) < k <= index(hi).
    int64_t lo = below, hi = ordinal(kMax);
    while (static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) > 1) {
      const int64_t mid = static_cast<int64_t>(static_cast<uint64_t>(lo) + (static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo)) / 2);
      if (reference_color_index(nz, from_ordinal(mid)) >= k) hi = mid;
      else lo = mid;
    }
    th.t[k - 1] = from_ordinal(hi);
    below = lo;
  }
  return th;
}

uint32_t color_index_by_thresholds(const ColorThresholds& th, double x) {
  if (x != x) return 256;
  const double key = th.key == ThresholdKey::Magnitude ? std::fabs(x) : x;
  if (key == kInf) return 255;
  if (key == -kInf) return 0;
  uint32_t pos = 0;
  for (uint32_t step = 128; step > 0; step /= 2) pos += th.t[pos + step - 1] <= key ? step : 0;
  return pos;
}

}  // namespace tmorph
