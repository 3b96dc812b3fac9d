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

namespace {

// Knuth's TwoSum: s + x as s' plus its exact rounding error, added to c (branch-free, so lanes vectorise).
inline void two_sum_add(double& s, double& c, double x) {
  const double t = s + x, bp = t - s;
  c += (s - (t - bp)) + (x - bp);
  s = t;
}

// Pairs with a NaN or an infinity: one at a time.
void accumulate_scalar(DiffTileStats& t, const double* a, const double* b, uint64_t n, uint32_t* buckets) {
  for (uint64_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    const bool same = x == y || (x != x && y != y);
    t.changed += !same;
    if (!std::isfinite(x) || !std::isfinite(y)) {
      ++t.nonfinite;
      continue;
    }
    const double d = y - x;
    if (buckets) ++buckets[delta_bucket(d)];
    t.max_abs = std::max(t.max_abs, std::fabs(d));
    t.min_delta = std::min(t.min_delta, d);
    t.max_delta = std::max(t.max_delta, d);
    t.sum_delta.add(d);
    t.sum_sq_delta.add(d * d);
    t.sum_sq_a.add(x * x);
    t.sum_sq_b.add(y * y);
    t.sum_ab.add(x * y);
  }
}

}  // namespace

// Finite runs in kLanes independent compensated lanes (TwoSum), combined into the tile's sums in lane order at the
// end of the call: the result depends only on the values and on how the caller cut them into calls (the pyramid
// builder always cuts a tile's rows the same way).
void accumulate_pairs(DiffTileStats& t, const double* a, const double* b, uint64_t n, uint32_t* buckets) {
  constexpr int kLanes = 4;
  bool finite = true;
  for (uint64_t i = 0; i < n; ++i) finite &= ((a[i] - a[i]) == 0.0) & ((b[i] - b[i]) == 0.0);
  if (!finite) {
    t.count += n;
    return accumulate_scalar(t, a, b, n, buckets);
  }
  if (buckets)
    for (uint64_t i = 0; i < n; ++i) ++buckets[delta_bucket(b[i] - a[i])];
  double s[5][kLanes] = {}, c[5][kLanes] = {}, changed[kLanes] = {};
  double mn[kLanes], mx[kLanes], am[kLanes] = {};
  for (int l = 0; l < kLanes; ++l) mn[l] = std::numeric_limits<double>::infinity(), mx[l] = -mn[l];
  const auto step = [&](int l, double x, double y) {
    const double d = y - x;
    changed[l] += d != 0.0 ? 1.0 : 0.0;  // finite x != y exactly when their difference is not zero
    mn[l] = d < mn[l] ? d : mn[l];
    mx[l] = d > mx[l] ? d : mx[l];
    const double ad = std::fabs(d);
    am[l] = ad > am[l] ? ad : am[l];
    two_sum_add(s[0][l], c[0][l], d);
    two_sum_add(s[1][l], c[1][l], d * d);
    two_sum_add(s[2][l], c[2][l], x * x);
    two_sum_add(s[3][l], c[3][l], y * y);
    two_sum_add(s[4][l], c[4][l], x * y);
  };
  uint64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) step(l, a[i + l], b[i + l]);
  for (int l = 0; i < n; ++i, ++l) step(l, a[i], b[i]);
  t.count += n;
  CompensatedSum* sums[5] = {&t.sum_delta, &t.sum_sq_delta, &t.sum_sq_a, &t.sum_sq_b, &t.sum_ab};
  for (int l = 0; l < kLanes; ++l) {
    t.changed += static_cast<uint64_t>(changed[l]);
    t.min_delta = std::min(t.min_delta, mn[l]);
    t.max_delta = std::max(t.max_delta, mx[l]);
    t.max_abs = std::max(t.max_abs, am[l]);
    for (int k = 0; k < 5; ++k) sums[k]->merge({s[k][l], c[k][l]});
  }
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
