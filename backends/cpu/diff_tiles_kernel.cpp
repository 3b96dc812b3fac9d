// TM_OP_DIFF_TILE_STATS on the CPU (diff_tiles_kernel.h). The 8 contract lanes are held in vectors of
// N = min(8, the target's float64 lanes) lanes: a pass over the segment per group of N lanes, each pass reading
// the group's N pairs out of every 8, so the arithmetic of every lane is the contract's on every target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "diff_tiles_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "diff_tiles_kernel.h"
#include "support/thread_pool.h"
#include "tensormorph/op_contracts.h"

#ifndef TM_DIFF_TILES_SHARED_
#define TM_DIFF_TILES_SHARED_
namespace tmorph::cpu::diff_tiles {

constexpr int kLanes = 8;   // the contract's lanes
constexpr int kSums = 5;    // Δ, Δ², a², b², a·b

// One segment's lanes, before they are merged into the tile.
struct Lanes {
  alignas(64) double s[kSums][kLanes];
  alignas(64) double c[kSums][kLanes];
  alignas(64) double lo[kLanes], hi[kLanes], abs_max[kLanes], changed[kLanes];
};

// The contract's bucket of a finite Δ (its sign and binade).
inline unsigned bucket_of(double delta) {
  const uint64_t bits = std::bit_cast<uint64_t>(delta);
  const int biased = static_cast<int>((bits >> 52) & 0x7FF);
  if (biased < 1023 - 63) return delta < 0 ? 127 : 128;
  const int k = biased - 1023 < 63 ? biased - 1023 : 63;
  return static_cast<unsigned>((bits >> 63) ? 63 - k : 192 + k);
}

// Neumaier's rule: the tile's running sum and compensation.
inline void neumaier_add(double& sum, double& comp, double x) {
  const double t = sum + x;
  comp += (std::fabs(sum) >= std::fabs(x)) ? (sum - t) + x : (x - t) + sum;
  sum = t;
}

// Knuth's TwoSum into one lane.
inline void two_sum(double& s, double& c, double x) {
  const double t = s + x, e = t - s;
  c += (s - (t - e)) + (x - e);
  s = t;
}

}  // namespace tmorph::cpu::diff_tiles
#endif

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using diff_tiles::kLanes;
using diff_tiles::Lanes;

// Lanes [first, first + N) over the pairs of the segment's whole groups of 8 (n8 pairs).
template <class D>
void lane_group(D d, const double* a, const double* b, uint64_t n8, size_t first, Lanes& L) {
  using V = hn::Vec<D>;
  const V zero = hn::Zero(d);
  V s0 = zero, s1 = zero, s2 = zero, s3 = zero, s4 = zero;
  V c0 = zero, c1 = zero, c2 = zero, c3 = zero, c4 = zero;
  V lo = hn::Set(d, std::numeric_limits<double>::infinity()), hi = hn::Neg(lo), am = zero, ch = zero;
  const V one = hn::Set(d, 1.0);
  const auto add = [&](V& s, V& c, V x) {
    const V t = hn::Add(s, x), e = hn::Sub(t, s);
    c = hn::Add(c, hn::Add(hn::Sub(s, hn::Sub(t, e)), hn::Sub(x, e)));
    s = t;
  };
  for (uint64_t i = first; i < n8; i += kLanes) {
    const V x = hn::LoadU(d, a + i), y = hn::LoadU(d, b + i);
    const V dl = hn::Sub(y, x);
    ch = hn::Add(ch, hn::IfThenElseZero(hn::Ne(dl, zero), one));
    lo = hn::Min(lo, dl);
    hi = hn::Max(hi, dl);
    am = hn::Max(am, hn::Abs(dl));
    add(s0, c0, dl);
    add(s1, c1, hn::Mul(dl, dl));
    add(s2, c2, hn::Mul(x, x));
    add(s3, c3, hn::Mul(y, y));
    add(s4, c4, hn::Mul(x, y));
  }
  hn::StoreU(s0, d, L.s[0] + first), hn::StoreU(s1, d, L.s[1] + first), hn::StoreU(s2, d, L.s[2] + first);
  hn::StoreU(s3, d, L.s[3] + first), hn::StoreU(s4, d, L.s[4] + first);
  hn::StoreU(c0, d, L.c[0] + first), hn::StoreU(c1, d, L.c[1] + first), hn::StoreU(c2, d, L.c[2] + first);
  hn::StoreU(c3, d, L.c[3] + first), hn::StoreU(c4, d, L.c[4] + first);
  hn::StoreU(lo, d, L.lo + first), hn::StoreU(hi, d, L.hi + first), hn::StoreU(am, d, L.abs_max + first);
  hn::StoreU(ch, d, L.changed + first);
}

// True when every pair of the segment is finite (x - x is 0 exactly for finite x, NaN otherwise).
bool AllFinite(const double* a, const double* b, uint64_t n) {
  const hn::ScalableTag<double> d;
  const size_t N = hn::Lanes(d);
  auto ok = hn::Zero(d);
  uint64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto x = hn::LoadU(d, a + i), y = hn::LoadU(d, b + i);
    ok = hn::Add(ok, hn::Add(hn::Sub(x, x), hn::Sub(y, y)));  // stays 0 unless some pair is not finite (NaN)
  }
  bool finite = hn::AllTrue(d, hn::Eq(ok, hn::Zero(d)));
  for (; i < n; ++i) finite &= ((a[i] - a[i]) == 0.0) & ((b[i] - b[i]) == 0.0);
  return finite;
}

// The vector part of a finite segment: every lane over the whole groups of 8, into L.
void FiniteLanes(const double* a, const double* b, uint64_t n8, Lanes* L) {
  const hn::CappedTag<double, kLanes> d;
  const size_t N = hn::Lanes(d);
  for (size_t first = 0; first < static_cast<size_t>(kLanes); first += N) lane_group(d, a, b, n8, first, *L);
}

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph::cpu {

HWY_EXPORT(AllFinite);
HWY_EXPORT(FiniteLanes);

namespace {

using namespace diff_tiles;

// A segment with a NaN or an infinity: pair by pair (the contract's rule).
void scalar_segment(tm_diff_tile_v1& t, const double* a, const double* b, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    if (!std::isfinite(x) || !std::isfinite(y)) {
      ++t.nonfinite;
      t.changed += !(x == y || (x != x && y != y));
      continue;
    }
    const double d = y - x;
    t.changed += d != 0.0;
    ++t.buckets[bucket_of(d)];
    t.max_abs = std::max(t.max_abs, std::fabs(d));
    t.min_delta = std::min(t.min_delta, d);
    t.max_delta = std::max(t.max_delta, d);
    const double terms[kSums] = {d, d * d, x * x, y * y, x * y};
    for (int k = 0; k < kSums; ++k) neumaier_add(t.sum[k], t.compensation[k], terms[k]);
  }
}

// A segment of finite pairs: the vector lanes over whole groups of 8, the rest into lanes i % 8 one by one
// (the same operations), the lanes merged in order; buckets pair by pair, unchanged pairs (Δ = 0, bucket 128)
// counted at once.
void finite_segment(tm_diff_tile_v1& t, const double* a, const double* b, uint64_t n) {
  const uint64_t n8 = n / kLanes * kLanes;
  Lanes L;
  HWY_DYNAMIC_DISPATCH(FiniteLanes)(a, b, n8, &L);
  for (uint64_t i = n8; i < n; ++i) {
    const int l = static_cast<int>(i - n8);
    const double x = a[i], y = b[i], d = y - x;
    L.changed[l] += d != 0.0 ? 1.0 : 0.0;
    L.lo[l] = d < L.lo[l] ? d : L.lo[l];
    L.hi[l] = d > L.hi[l] ? d : L.hi[l];
    L.abs_max[l] = std::fabs(d) > L.abs_max[l] ? std::fabs(d) : L.abs_max[l];
    const double terms[kSums] = {d, d * d, x * x, y * y, x * y};
    for (int k = 0; k < kSums; ++k) two_sum(L.s[k][l], L.c[k][l], terms[k]);
  }
  uint64_t changed = 0;
  for (int l = 0; l < kLanes; ++l) {
    changed += static_cast<uint64_t>(L.changed[l]);
    t.min_delta = std::min(t.min_delta, L.lo[l]);
    t.max_delta = std::max(t.max_delta, L.hi[l]);
    t.max_abs = std::max(t.max_abs, L.abs_max[l]);
    for (int k = 0; k < kSums; ++k) {
      neumaier_add(t.sum[k], t.compensation[k], L.s[k][l]);
      t.compensation[k] += L.c[k][l];
    }
  }
  t.changed += changed;
  t.buckets[128] += n - changed;  // finite x == y exactly when Δ == 0
  if (changed)
    for (uint64_t i = 0; i < n; ++i) {
      const double d = b[i] - a[i];
      if (d != 0.0) ++t.buckets[bucket_of(d)];
    }
}

}  // namespace

tm_status run_diff_tile_stats(const tm_kernel_call_v1& c, std::string* error) {
  const auto* p = static_cast<const tm_diff_tile_params_v1*>(c.params);
  if (c.params_size < sizeof(tm_diff_tile_params_v1) || !p) return *error = "diff.tile_stats: params missing", TM_ERR_INVALID_ARGUMENT;
  if (p->rows == 0 || p->cols == 0 || p->tile_cols == 0)
    return *error = "diff.tile_stats: rows, cols and tile_cols must be at least 1", TM_ERR_INVALID_ARGUMENT;
  if (p->cols > std::numeric_limits<uint64_t>::max() / p->rows || p->rows * p->cols != c.element_count)
    return *error = "diff.tile_stats: element_count " + std::to_string(c.element_count) + " is not rows x cols (" +
                    std::to_string(p->rows) + " x " + std::to_string(p->cols) + ")",
           TM_ERR_INVALID_ARGUMENT;
  if (!p->b || !c.input) return *error = "diff.tile_stats: null a or b", TM_ERR_INVALID_ARGUMENT;
  const uint64_t tiles = (p->cols + p->tile_cols - 1) / p->tile_cols;
  if (!c.output || c.output_size < tiles * sizeof(tm_diff_tile_v1))
    return *error = "diff.tile_stats: output holds " + std::to_string(c.output_size / sizeof(tm_diff_tile_v1)) +
                    " tiles; the call has " + std::to_string(tiles),
           TM_ERR_INVALID_ARGUMENT;
  const auto* a = static_cast<const double*>(c.input);
  auto* out = static_cast<tm_diff_tile_v1*>(c.output);
  const auto run = [&](uint64_t t0, uint64_t t1, unsigned) {
    for (uint64_t r = 0; r < p->rows; ++r)
      for (uint64_t t = t0; t < t1; ++t) {
        const uint64_t c0 = t * p->tile_cols, n = std::min(p->cols, c0 + p->tile_cols) - c0;
        const double* sa = a + r * p->cols + c0;
        const double* sb = p->b + r * p->cols + c0;
        out[t].count += n;
        if (HWY_DYNAMIC_DISPATCH(AllFinite)(sa, sb, n)) finite_segment(out[t], sa, sb, n);
        else scalar_segment(out[t], sa, sb, n);
      }
  };
  if (c.threads > 1 && tiles > 1 && c.element_count >= (uint64_t{1} << 16)) ThreadPool::shared(c.threads).parallel_for(tiles, run);
  else run(0, tiles, 0);
  return TM_OK;
}

}  // namespace tmorph::cpu
#endif  // HWY_ONCE
