// SIMD level-0 tile accumulation (tile_kernels.h): Highway, dynamically dispatched per CPU.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tile_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "order_bucket.h"
#include "tile_kernels.h"
#include "support/simd_f32_loaders-inl.h"

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using tmorph::HWY_NAMESPACE::LoadBF16;
using tmorph::HWY_NAMESPACE::LoadF16;
using tmorph::HWY_NAMESPACE::LoadF32;

constexpr int kLanes = TileSums::kLanes;
// Above this many distinct magnitude bytes in a segment, the histogram counts element by element
// instead of comparing the whole segment once per byte value.
constexpr int kMaxCompareBytes = 12;

// bucket_of_top_byte (order_bucket.h) as a table, for counting element by element without a branch on
// the sign.
struct BucketTable {
  uint8_t of[256];
  constexpr BucketTable() : of() {
    for (uint32_t t = 0; t < 256; ++t) of[t] = static_cast<uint8_t>(bucket_of_top_byte(t));
  }
};
constexpr BucketTable kBucketOf;

// The 16-bit pattern of a non-negative f32 that is exactly an f16 (normal or subnormal).
inline uint32_t f16_bits_of(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  const int exponent = static_cast<int>(b >> 23) - 127;
  if (x == 0) return 0;
  if (exponent < -14) return static_cast<uint32_t>(std::ldexp(x, 24));  // subnormal: mantissa in 2^-24 units
  return (static_cast<uint32_t>(exponent + 15) << 10) | ((b >> 13) & 0x3FF);
}

// The most significant byte of the stored pattern of a non-negative value of dtype, without its sign.
inline uint32_t magnitude_byte(DType dtype, float x) {
  if (dtype == DType::F16) return f16_bits_of(x) >> 8;
  return std::bit_cast<uint32_t>(x) >> 24;  // f32, and bf16 (the top half of an f32)
}

inline float element(DType dtype, const uint8_t* data, uint64_t i) {
  switch (dtype) {
    case DType::BF16: {
      uint16_t b;
      std::memcpy(&b, data + 2 * i, 2);
      return std::bit_cast<float>(uint32_t{b} << 16);
    }
    case DType::F16: {
      uint16_t b;
      std::memcpy(&b, data + 2 * i, 2);
      return static_cast<float>(f16_to_double(b));
    }
    default: {
      float f;
      std::memcpy(&f, data + 4 * i, 4);
      return f;
    }
  }
}

// Per-segment results the histogram needs.
struct SegmentExtent {
  uint64_t finite = 0;
  float abs_min = std::numeric_limits<float>::infinity(), abs_max = 0;
};

// Elements [begin, end) one at a time, each into lane i % 16: the tail of a segment (and every element
// on a target without vectors). The same operations as the vector loop, fused multiply-add included.
void add_elements_scalar(DType dtype, const uint8_t* data, uint64_t begin, uint64_t end, TileSums& s,
                         SegmentExtent& e) {
  const double shift = s.shift;
  for (uint64_t i = begin; i < end; ++i) {
    const float x = element(dtype, data, i);
    const int l = static_cast<int>(i % kLanes);
    const float a = std::fabs(x);
    if (std::isnan(x)) ++s.nan;
    if (x == 0) ++s.zero;
    if (!(a < std::numeric_limits<float>::infinity())) continue;
    ++e.finite;
    e.abs_min = std::min(e.abs_min, a), e.abs_max = std::max(e.abs_max, a);
    s.lo[l] = std::min(s.lo[l], x), s.hi[l] = std::max(s.hi[l], x), s.abs_max[l] = std::max(s.abs_max[l], a);
    const double d = static_cast<double>(x) - shift;
    s.sum[l] += d;
    s.sq[l] = std::fma(d, d, s.sq[l]);
  }
}

#if HWY_TARGET != HWY_SCALAR
// Groups of 16 elements: V f32 vectors of N lanes, each promoted to two f64 halves so that element j
// of a group always feeds f64 accumulator lane j. Returns the elements handled (a multiple of 16).
//
// kMasked = false is the fast path for segments without NaN or +-Inf (nearly all real data): nothing
// is masked and s is left untouched when a non-finite value shows up (it returns 0 and the caller
// reruns the segment masked). Both give the same results on an all-finite segment.
template <class Loader, bool kMasked>
uint64_t add_groups(DType dtype, const uint8_t* data, uint64_t n, TileSums& s, SegmentExtent& e) {
  const hn::CappedTag<float, kLanes> df;
  const hn::Half<decltype(df)> dh;
  const hn::Rebind<double, decltype(dh)> dd;
  const size_t N = hn::Lanes(df), H = hn::Lanes(dd), V = kLanes / N;
  const size_t width = dtype_size(dtype);
  const auto inf = hn::Set(df, std::numeric_limits<float>::infinity());
  const auto ninf = hn::Neg(inf);
  const auto zero = hn::Zero(df);
  const auto shift = hn::Set(df, s.shift);
  const auto shift64 = hn::Set(dd, static_cast<double>(s.shift));

  hn::Vec<decltype(df)> lo[kLanes], hi[kLanes], am[kLanes];
  hn::Vec<decltype(dd)> sum[2 * kLanes], sq[2 * kLanes];
  for (size_t j = 0; j < V; ++j) {
    lo[j] = hn::Load(df, s.lo + j * N), hi[j] = hn::Load(df, s.hi + j * N), am[j] = hn::Load(df, s.abs_max + j * N);
    for (size_t h = 0; h < 2; ++h)
      sum[2 * j + h] = hn::Load(dd, s.sum + j * N + h * H), sq[2 * j + h] = hn::Load(dd, s.sq + j * N + h * H);
  }
  uint64_t finite = 0, nan = 0, zeros = 0;
  auto all_finite = hn::Eq(zero, zero);
  auto seg_min = inf, seg_max = zero;
  const uint64_t groups = n / kLanes;
  for (uint64_t g = 0; g < groups; ++g) {
    for (size_t j = 0; j < V; ++j) {
      const auto x = Loader::Load(df, data + (g * kLanes + j * N) * width);
      const auto a = hn::Abs(x);
      const auto is_finite = hn::Lt(a, inf);
      zeros += hn::CountTrue(df, hn::Eq(x, zero));
      auto xs = x;
      if constexpr (kMasked) {
        finite += hn::CountTrue(df, is_finite);
        nan += hn::CountTrue(df, hn::IsNaN(x));
        const auto fa = hn::IfThenElseZero(is_finite, a);
        lo[j] = hn::Min(lo[j], hn::IfThenElse(is_finite, x, inf));
        hi[j] = hn::Max(hi[j], hn::IfThenElse(is_finite, x, ninf));
        am[j] = hn::Max(am[j], fa);
        seg_min = hn::Min(seg_min, hn::IfThenElse(is_finite, a, inf));
        seg_max = hn::Max(seg_max, fa);
        xs = hn::IfThenElse(is_finite, x, shift);  // a non-finite x adds 0
      } else {
        all_finite = hn::And(all_finite, is_finite);
        lo[j] = hn::Min(lo[j], x), hi[j] = hn::Max(hi[j], x), am[j] = hn::Max(am[j], a);
        seg_min = hn::Min(seg_min, a), seg_max = hn::Max(seg_max, a);
      }
      const auto d0 = hn::Sub(hn::PromoteTo(dd, hn::LowerHalf(dh, xs)), shift64);
      const auto d1 = hn::Sub(hn::PromoteTo(dd, hn::UpperHalf(dh, xs)), shift64);
      sum[2 * j] = hn::Add(sum[2 * j], d0);
      sum[2 * j + 1] = hn::Add(sum[2 * j + 1], d1);
      sq[2 * j] = hn::MulAdd(d0, d0, sq[2 * j]);
      sq[2 * j + 1] = hn::MulAdd(d1, d1, sq[2 * j + 1]);
    }
  }
  if constexpr (!kMasked) {
    if (!hn::AllTrue(df, all_finite)) return 0;
    finite = groups * kLanes;
  }
  for (size_t j = 0; j < V; ++j) {
    hn::Store(lo[j], df, s.lo + j * N), hn::Store(hi[j], df, s.hi + j * N), hn::Store(am[j], df, s.abs_max + j * N);
    for (size_t h = 0; h < 2; ++h)
      hn::Store(sum[2 * j + h], dd, s.sum + j * N + h * H), hn::Store(sq[2 * j + h], dd, s.sq + j * N + h * H);
  }
  e.finite += finite;
  s.nan += nan;
  s.zero += zeros;
  e.abs_min = std::min(e.abs_min, hn::GetLane(hn::MinOfLanes(df, seg_min)));
  e.abs_max = std::max(e.abs_max, hn::GetLane(hn::MaxOfLanes(df, seg_max)));
  return groups * kLanes;
}

template <class Loader>
uint64_t add_groups_any(DType dtype, const uint8_t* data, uint64_t n, TileSums& s, SegmentExtent& e) {
  if (n < kLanes) return 0;
  const uint64_t done = add_groups<Loader, false>(dtype, data, n, s, e);
  return done ? done : add_groups<Loader, true>(dtype, data, n, s, e);
}

// The most significant byte of each of n stored elements (little-endian), into top[0, n).
template <class U>
void top_bytes(const uint8_t* data, uint64_t n, uint8_t* top) {
  const hn::ScalableTag<U> du;
  const hn::Rebind<uint8_t, decltype(du)> d8;
  const size_t N = hn::Lanes(du);
  uint64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto v = hn::LoadU(du, reinterpret_cast<const U*>(data) + i);
    hn::StoreU(hn::TruncateTo(d8, hn::ShiftRight<8 * sizeof(U) - 8>(v)), d8, top + i);
  }
  for (; i < n; ++i) top[i] = data[i * sizeof(U) + sizeof(U) - 1];
}

// Counts n all-finite elements whose top bytes are in top[] and whose magnitude bytes lie in
// [lo, hi]: once through the segment per magnitude byte, positive and negative values at once.
void count_by_comparison(const uint8_t* top, uint64_t n, uint32_t lo, uint32_t hi, uint32_t* buckets) {
  const hn::ScalableTag<uint8_t> d8;
  const size_t N = hn::Lanes(d8);
  const uint64_t whole = n / N * N;
  for (uint32_t m = lo; m <= hi; ++m) {
    const auto pos = hn::Set(d8, static_cast<uint8_t>(m)), neg = hn::Set(d8, static_cast<uint8_t>(m | 0x80));
    uint64_t p = 0, q = 0;
    for (uint64_t i = 0; i < whole; i += N) {
      const auto t = hn::LoadU(d8, top + i);
      p += hn::CountTrue(d8, hn::Eq(t, pos));
      q += hn::CountTrue(d8, hn::Eq(t, neg));
    }
    for (uint64_t i = whole; i < n; ++i) p += top[i] == m, q += top[i] == (m | 0x80);
    buckets[bucket_of_top_byte(m)] += static_cast<uint32_t>(p);
    buckets[bucket_of_top_byte(m | 0x80)] += static_cast<uint32_t>(q);
  }
}
#endif

// The histogram of a segment that holds a non-finite value (or runs without vectors): element by
// element, finite ones only.
void count_finite_scalar(DType dtype, const uint8_t* data, uint64_t n, uint32_t* buckets) {
  const size_t width = dtype_size(dtype);
  for (uint64_t i = 0; i < n; ++i) {
    if (!std::isfinite(element(dtype, data, i))) continue;
    ++buckets[kBucketOf.of[data[i * width + width - 1]]];
  }
}

void AddTileSegment(uint32_t dtype_code, const uint8_t* data, uint64_t n, TileSums* s, uint32_t* buckets) {
  const DType dtype = static_cast<DType>(dtype_code);
  SegmentExtent e;
  uint64_t done = 0;
#if HWY_TARGET != HWY_SCALAR
  switch (dtype) {
    case DType::BF16: done = add_groups_any<LoadBF16>(dtype, data, n, *s, e); break;
    case DType::F16: done = add_groups_any<LoadF16>(dtype, data, n, *s, e); break;
    default: done = add_groups_any<LoadF32>(dtype, data, n, *s, e); break;
  }
#endif
  add_elements_scalar(dtype, data, done, n, *s, e);
  s->count += n;
  s->finite += e.finite;
  if (e.finite == 0) return;
#if HWY_TARGET != HWY_SCALAR
  if (e.finite == n) {
    const uint32_t lo = magnitude_byte(dtype, e.abs_min), hi = magnitude_byte(dtype, e.abs_max);
    HWY_ALIGN uint8_t top[4096];
    for (uint64_t first = 0; first < n; first += sizeof top) {
      const uint64_t k = std::min<uint64_t>(sizeof top, n - first);
      const uint8_t* p = data + first * dtype_size(dtype);
      if (dtype_size(dtype) == 2) top_bytes<uint16_t>(p, k, top);
      else top_bytes<uint32_t>(p, k, top);
      if (hi - lo < kMaxCompareBytes) {
        count_by_comparison(top, k, lo, hi, buckets);
      } else {
        for (uint64_t i = 0; i < k; ++i) ++buckets[kBucketOf.of[top[i]]];
      }
    }
    return;
  }
#endif
  count_finite_scalar(dtype, data, n, buckets);
}

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph::cpu {

HWY_EXPORT(AddTileSegment);

bool tile_kernel_supports(DType dtype) { return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16; }

void start_tile(TileSums& s) {
  s = TileSums{};
  std::fill(std::begin(s.sum), std::end(s.sum), 0.0);
  std::fill(std::begin(s.sq), std::end(s.sq), 0.0);
  std::fill(std::begin(s.lo), std::end(s.lo), std::numeric_limits<float>::infinity());
  std::fill(std::begin(s.hi), std::end(s.hi), -std::numeric_limits<float>::infinity());
  std::fill(std::begin(s.abs_max), std::end(s.abs_max), 0.0f);
}

void add_tile_segment(DType dtype, const uint8_t* data, uint64_t n, TileSums& s, uint32_t* buckets) {
  if (s.count == 0) {
    // The shift: the mean of the finite values of the tile's first segment, rounded to f32 (one outlier
    // among them moves it by outlier / n, where a single value as the shift could be the outlier itself).
    double sum = 0;
    uint64_t finite = 0;
    for (uint64_t i = 0; i < n; ++i) {
      const float x = HWY_STATIC_DISPATCH(element)(dtype, data, i);
      if (std::isfinite(x)) sum += x, ++finite;
    }
    s.shift = finite ? static_cast<float>(sum / static_cast<double>(finite)) : 0.0f;
  }
  HWY_DYNAMIC_DISPATCH(AddTileSegment)(static_cast<uint32_t>(dtype), data, n, &s, buckets);
}

void finish_tile(const TileSums& s, tm_tile_stats_v1& t) {
  t.count = s.count;
  t.nan_count = s.nan;
  t.zero_count = s.zero;
  t.inf_count = s.count - s.finite - s.nan;
  t.min = std::numeric_limits<double>::infinity(), t.max = -std::numeric_limits<double>::infinity();
  t.abs_max = 0, t.sum = 0, t.m2 = 0;
  if (s.finite == 0) return;
  double sum = 0, sq = 0;
  for (int l = 0; l < TileSums::kLanes; ++l) {
    sum += s.sum[l], sq += s.sq[l];
    t.min = std::min(t.min, static_cast<double>(s.lo[l]));
    t.max = std::max(t.max, static_cast<double>(s.hi[l]));
    t.abs_max = std::max(t.abs_max, static_cast<double>(s.abs_max[l]));
  }
  const double n = static_cast<double>(s.finite);
  t.sum = sum + static_cast<double>(s.shift) * n;
  t.m2 = std::max(0.0, sq - sum * sum / n);
}

}  // namespace tmorph::cpu
#endif  // HWY_ONCE
