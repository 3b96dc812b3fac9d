#include "lod/tile_stats.h"

#include <algorithm>
#include <cstring>

#include "tensormorph/error.h"

namespace tmorph {

void merge_into(TileStats& a, const TileStats& b) {
  const double na = static_cast<double>(a.finite()), nb = static_cast<double>(b.finite());
  if (nb > 0) {
    if (na == 0) {
      a.m2 = b.m2;
    } else {
      const double delta = b.sum / nb - a.sum / na;
      a.m2 = a.m2 + b.m2 + delta * delta * (na * nb / (na + nb));
    }
    a.sum += b.sum;
    a.min = std::min(a.min, b.min);
    a.max = std::max(a.max, b.max);
    a.abs_max = std::max(a.abs_max, b.abs_max);
  }
  a.count += b.count;
  a.nan += b.nan;
  a.inf += b.inf;
  a.zero += b.zero;
  if (a.hist.size() < b.hist.size()) a.hist.resize(b.hist.size(), 0);
  for (size_t i = 0; i < b.hist.size(); ++i) a.hist[i] += b.hist[i];
}

// One pass in kLanes independent lanes (the compiler vectorises them; no reassociation is needed), the
// lanes combined in a fixed order, so the result depends only on the values. m2 is accumulated about
// a shift c (the first value when finite, else 0): m2 = sum (x - c)^2 - (sum (x - c))^2 / finite,
// accurate to float64 rounding relative to sum (x - c)^2.
TileStats stats_of(const double* values, uint64_t n) {
  constexpr int kLanes = 8;
  constexpr double inf = std::numeric_limits<double>::infinity();
  TileStats t;
  t.count = n;
  if (n == 0) return t;
  const double c = std::isfinite(values[0]) ? values[0] : 0.0;
  // Counts are kept as float64 lanes (exact below 2^53) so that every lane operation is a select on
  // float64 that the compiler turns into vector code.
  double sum[kLanes] = {}, sq[kLanes] = {}, mn[kLanes], mx[kLanes], am[kLanes] = {};
  double fin[kLanes] = {}, nan[kLanes] = {}, zero[kLanes] = {};
  for (int l = 0; l < kLanes; ++l) mn[l] = inf, mx[l] = -inf;
  const auto step = [&](int l, double x) {
    const bool f = (x - x) == 0.0;  // false for NaN and +-Inf
    const double d = f ? x - c : 0.0;
    const double lo = f ? x : inf, hi = f ? x : -inf, a = f ? std::fabs(x) : 0.0;
    sum[l] += d;
    sq[l] += d * d;
    mn[l] = lo < mn[l] ? lo : mn[l];
    mx[l] = hi > mx[l] ? hi : mx[l];
    am[l] = a > am[l] ? a : am[l];
    fin[l] += f ? 1.0 : 0.0;
    nan[l] += x != x ? 1.0 : 0.0;
    zero[l] += x == 0.0 ? 1.0 : 0.0;
  };
  uint64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) step(l, values[i + l]);
  for (int l = 0; i < n; ++i, ++l) step(l, values[i]);
  double s = 0, q = 0, finite_lanes = 0, nan_lanes = 0, zero_lanes = 0;
  for (int l = 0; l < kLanes; ++l) {
    s += sum[l], q += sq[l];
    t.min = std::min(t.min, mn[l]), t.max = std::max(t.max, mx[l]), t.abs_max = std::max(t.abs_max, am[l]);
    finite_lanes += fin[l], nan_lanes += nan[l], zero_lanes += zero[l];
  }
  const uint64_t finite = static_cast<uint64_t>(finite_lanes);
  t.nan = static_cast<uint64_t>(nan_lanes);
  t.zero = static_cast<uint64_t>(zero_lanes);
  t.inf = n - finite - t.nan;
  if (finite) {
    t.sum = s + c * static_cast<double>(finite);
    t.m2 = std::max(0.0, q - s * s / static_cast<double>(finite));
  }
  return t;
}

namespace {
constexpr size_t kFixedBytes = 9 * 8;
}

std::vector<uint8_t> encode_tile(const TileStats& t) {
  std::vector<uint8_t> out(kFixedBytes + t.hist.size() * 8);
  const uint64_t counts[4] = {t.count, t.nan, t.inf, t.zero};
  const double reals[5] = {t.min, t.max, t.abs_max, t.sum, t.m2};
  std::memcpy(out.data(), counts, sizeof counts);
  std::memcpy(out.data() + sizeof counts, reals, sizeof reals);
  if (!t.hist.empty()) std::memcpy(out.data() + kFixedBytes, t.hist.data(), t.hist.size() * 8);
  return out;
}

TileStats decode_tile(const uint8_t* data, size_t bytes, size_t bins, const char* where) {
  if (bytes != kFixedBytes + bins * 8)
    throw Error(ErrorKind::BadInput, std::string(where) + ": a pyramid tile record of " + std::to_string(bytes) +
                                         " bytes; expected " + std::to_string(kFixedBytes + bins * 8) + " for " +
                                         std::to_string(bins) + " histogram bins");
  TileStats t;
  uint64_t counts[4];
  double reals[5];
  std::memcpy(counts, data, sizeof counts);
  std::memcpy(reals, data + sizeof counts, sizeof reals);
  t.count = counts[0], t.nan = counts[1], t.inf = counts[2], t.zero = counts[3];
  t.min = reals[0], t.max = reals[1], t.abs_max = reals[2], t.sum = reals[3], t.m2 = reals[4];
  if (t.nan + t.inf > t.count || t.zero > t.count)
    throw Error(ErrorKind::BadInput, std::string(where) + ": a pyramid tile record whose counts contradict each other");
  t.hist.resize(bins);
  if (bins) std::memcpy(t.hist.data(), data + kFixedBytes, bins * 8);
  return t;
}

}  // namespace tmorph
