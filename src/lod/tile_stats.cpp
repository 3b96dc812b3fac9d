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

TileStats stats_of(const double* values, uint64_t n) {
  TileStats t;
  t.count = n;
  double sum = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const double x = values[i];
    if (std::isnan(x)) {
      ++t.nan;
    } else if (std::isinf(x)) {
      ++t.inf;
    } else {
      t.zero += x == 0;
      t.min = std::min(t.min, x);
      t.max = std::max(t.max, x);
      t.abs_max = std::max(t.abs_max, std::fabs(x));
      sum += x;
    }
  }
  t.sum = sum;
  if (const uint64_t f = t.finite()) {
    const double mean = sum / static_cast<double>(f);
    double m2 = 0;
    for (uint64_t i = 0; i < n; ++i)
      if (std::isfinite(values[i])) m2 += (values[i] - mean) * (values[i] - mean);
    t.m2 = m2;
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
