#include "diff/diff_tile.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "tensormorph/error.h"

namespace tmorph {

double DiffTileStats::rel_change() const {
  const double dd = sum_sq_delta.value(), aa = sum_sq_a.value();
  if (dd == 0) return 0;
  return aa > 0 ? std::sqrt(dd / aa) : std::numeric_limits<double>::quiet_NaN();
}

double DiffTileStats::cosine() const {
  const double aa = sum_sq_a.value(), bb = sum_sq_b.value();
  return aa > 0 && bb > 0 ? sum_ab.value() / std::sqrt(aa * bb) : std::numeric_limits<double>::quiet_NaN();
}

DiffTileStats from_kernel_tile(const tm_diff_tile_v1& k) {
  DiffTileStats t;
  t.count = k.count, t.changed = k.changed, t.nonfinite = k.nonfinite;
  t.max_abs = k.max_abs, t.min_delta = k.min_delta, t.max_delta = k.max_delta;
  CompensatedSum* sums[5] = {&t.sum_delta, &t.sum_sq_delta, &t.sum_sq_a, &t.sum_sq_b, &t.sum_ab};
  for (int i = 0; i < 5; ++i) *sums[i] = {k.sum[i], k.compensation[i]};
  return t;
}

void merge_into(DiffTileStats& t, const DiffTileStats& o) {
  t.count += o.count, t.changed += o.changed, t.nonfinite += o.nonfinite;
  t.max_abs = std::max(t.max_abs, o.max_abs);
  t.min_delta = std::min(t.min_delta, o.min_delta);
  t.max_delta = std::max(t.max_delta, o.max_delta);
  t.sum_delta.merge(o.sum_delta);
  t.sum_sq_delta.merge(o.sum_sq_delta);
  t.sum_sq_a.merge(o.sum_sq_a);
  t.sum_sq_b.merge(o.sum_sq_b);
  t.sum_ab.merge(o.sum_ab);
  if (t.hist.size() < o.hist.size()) t.hist.resize(o.hist.size(), 0);
  for (size_t i = 0; i < o.hist.size(); ++i) t.hist[i] += o.hist[i];
}

namespace {
constexpr size_t kFixedBytes = 3 * 8 + 13 * 8;
}

std::vector<uint8_t> encode_diff_tile(const DiffTileStats& t) {
  std::vector<uint8_t> out(kFixedBytes + t.hist.size() * 8);
  const uint64_t counts[3] = {t.count, t.changed, t.nonfinite};
  const double reals[13] = {t.max_abs,          t.min_delta,   t.max_delta,
                            t.sum_delta.sum,    t.sum_delta.compensation,
                            t.sum_sq_delta.sum, t.sum_sq_delta.compensation,
                            t.sum_sq_a.sum,     t.sum_sq_a.compensation,
                            t.sum_sq_b.sum,     t.sum_sq_b.compensation,
                            t.sum_ab.sum,       t.sum_ab.compensation};
  std::memcpy(out.data(), counts, sizeof counts);
  std::memcpy(out.data() + sizeof counts, reals, sizeof reals);
  if (!t.hist.empty()) std::memcpy(out.data() + kFixedBytes, t.hist.data(), t.hist.size() * 8);
  return out;
}

DiffTileStats decode_diff_tile(const uint8_t* data, size_t bytes, size_t bins, const std::string& where) {
  if (bytes != kFixedBytes + bins * 8)
    throw Error(ErrorKind::BadInput, where + ": a difference tile record of " + std::to_string(bytes) + " bytes; expected " +
                                         std::to_string(kFixedBytes + bins * 8) + " for " + std::to_string(bins) +
                                         " histogram bins");
  DiffTileStats t;
  uint64_t counts[3];
  double r[13];
  std::memcpy(counts, data, sizeof counts);
  std::memcpy(r, data + sizeof counts, sizeof r);
  t.count = counts[0], t.changed = counts[1], t.nonfinite = counts[2];
  if (t.changed > t.count || t.nonfinite > t.count)
    throw Error(ErrorKind::BadInput, where + ": a difference tile record whose counts contradict each other (" +
                                         std::to_string(t.changed) + " changed and " + std::to_string(t.nonfinite) +
                                         " non-finite of " + std::to_string(t.count) + " pairs)");
  t.max_abs = r[0], t.min_delta = r[1], t.max_delta = r[2];
  t.sum_delta = {r[3], r[4]}, t.sum_sq_delta = {r[5], r[6]}, t.sum_sq_a = {r[7], r[8]};
  t.sum_sq_b = {r[9], r[10]}, t.sum_ab = {r[11], r[12]};
  t.hist.resize(bins);
  if (bins) std::memcpy(t.hist.data(), data + kFixedBytes, bins * 8);
  uint64_t in_bins = 0;
  for (uint64_t c : t.hist) in_bins += c;
  if (bins && in_bins != t.finite())
    throw Error(ErrorKind::BadInput, where + ": a difference tile record whose histogram holds " + std::to_string(in_bins) +
                                         " values; expected its " + std::to_string(t.finite()) + " finite pairs");
  return t;
}

}  // namespace tmorph
