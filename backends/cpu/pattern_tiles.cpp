// Level-0 tiles from bit-pattern counts (pattern_tiles.h). The 16-bit floats' per-row pass and pattern
// scan are Highway kernels, dynamically dispatched per CPU; the 8-bit dtypes scan their 256 patterns.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "pattern_tiles.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "order_bucket.h"
#include "pattern_tiles.h"
#include "widened_tiles.h"

#ifndef TM_LOD_PATTERN_TILES_SHARED
#define TM_LOD_PATTERN_TILES_SHARED
namespace tmorph::cpu::pattern_tiles {

// What a 16-bit float tile's rows show before their patterns are counted (pattern_tiles.h).
struct RowExtent {
  uint32_t key_min, key_max, mag_low, mag_high;
  uint64_t non_finite;
};

// Patterns per virtual float64 lane group of the scan: ranges start and end on multiples of it.
constexpr uint32_t kScanGroup = 32;

// Sums of a scan over [begin, end) patterns: per virtual lane (pattern p feeds lane p % kScanGroup).
struct ScanLanes {
  double sum[kScanGroup];
  double sq[kScanGroup];
};

}  // namespace tmorph::cpu::pattern_tiles
#endif

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using pattern_tiles::kScanGroup;
using pattern_tiles::RowExtent;
using pattern_tiles::ScanLanes;

// The rows' order-key and magnitude extents (vectors), then each element's pattern counted in
// even / odd (element by element: the counts are scattered).
void CountRows16(const uint8_t* first, uint64_t stride, uint64_t rows, uint64_t cols, uint32_t exp_mask,
                 uint16_t* even, uint16_t* odd, RowExtent* extent) {
  const hn::ScalableTag<uint16_t> d16;
  const hn::RebindToSigned<decltype(d16)> di16;
  const size_t N = hn::Lanes(d16);
  const auto magnitude_mask = hn::Set(d16, 0x7FFF), exponent = hn::Set(d16, static_cast<uint16_t>(exp_mask));
  const auto sign = hn::Set(d16, 0x8000), ones = hn::Set(d16, 0xFFFF), zero = hn::Zero(d16);
  auto key_min = ones, key_max = zero, mag_low = ones, mag_high = zero;
  uint32_t k_min = extent->key_min, k_max = extent->key_max, m_low = extent->mag_low, m_high = extent->mag_high;
  uint64_t nf = extent->non_finite;
  for (uint64_t r = 0; r < rows; ++r) {
    const uint8_t* row = first + r * stride;
    uint64_t i = 0;
    for (; i + N <= cols; i += N) {
      const auto x = hn::LoadU(d16, reinterpret_cast<const uint16_t*>(row) + i);
      const auto mag = hn::And(x, magnitude_mask);
      const auto finite = hn::Lt(mag, exponent);
      const auto key = hn::Xor(x, hn::Or(hn::BitCast(d16, hn::ShiftRight<15>(hn::BitCast(di16, x))), sign));
      key_min = hn::Min(key_min, hn::IfThenElse(finite, key, ones));
      key_max = hn::Max(key_max, hn::IfThenElseZero(finite, key));
      mag_low = hn::Min(mag_low, hn::IfThenElse(hn::And(finite, hn::Ne(mag, zero)), mag, ones));
      mag_high = hn::Max(mag_high, hn::IfThenElseZero(finite, mag));
      nf += hn::CountTrue(d16, hn::Not(finite));
    }
    for (; i < cols; ++i) {
      uint16_t x;
      std::memcpy(&x, row + 2 * i, 2);
      const uint32_t mag = x & 0x7FFFu;
      if (mag >= exp_mask) {
        ++nf;
        continue;
      }
      const uint32_t key = (x & 0x8000u) ? (~x & 0xFFFFu) : (x | 0x8000u);
      k_min = std::min(k_min, key), k_max = std::max(k_max, key);
      if (mag) m_low = std::min(m_low, mag);
      m_high = std::max(m_high, mag);
    }
    for (i = 0; i + 2 <= cols; i += 2) {
      uint16_t a, b;
      std::memcpy(&a, row + 2 * i, 2);
      std::memcpy(&b, row + 2 * i + 2, 2);
      ++even[a], ++odd[b];
    }
    if (i < cols) {
      uint16_t a;
      std::memcpy(&a, row + 2 * i, 2);
      ++even[a];
    }
  }
  HWY_ALIGN uint16_t lanes[4][HWY_MAX_BYTES / sizeof(uint16_t)];
  hn::Store(key_min, d16, lanes[0]), hn::Store(key_max, d16, lanes[1]), hn::Store(mag_low, d16, lanes[2]);
  hn::Store(mag_high, d16, lanes[3]);
  for (size_t l = 0; l < N; ++l) {
    k_min = std::min<uint32_t>(k_min, lanes[0][l]), k_max = std::max<uint32_t>(k_max, lanes[1][l]);
    m_low = std::min<uint32_t>(m_low, lanes[2][l]), m_high = std::max<uint32_t>(m_high, lanes[3][l]);
  }
  *extent = {k_min, k_max, m_low, m_high, nf};
}

// 2^k as a float64 (k within the normal range).
inline double pow2(int k) { return std::bit_cast<double>(static_cast<uint64_t>(1023 + k) << 52); }

// Over the finite patterns [begin, end) of one sign half (multiples of kScanGroup): adds count x d and
// count x d^2 (d = value - shift) into lanes and leaves the counts zero; when kTally, also adds each
// pattern's count into totals and each 256-pattern block's count into block_counts[block]. Groups
// without a count are skipped. A group
// never straddles two exponents, so its values are v0 + i x ulp (i < 32, exact) and d = (v0 - shift) +
// i x ulp: two roundings, the same on every target.
template <bool kF16, bool kTally>
void Scan(uint16_t* even, uint16_t* odd, uint32_t begin, uint32_t end, double shift, ScanLanes* lanes,
          uint64_t* totals, uint64_t* block_counts) {
  const hn::CappedTag<double, 8> dd;
  const hn::Rebind<uint16_t, decltype(dd)> d16;
  const hn::Rebind<uint32_t, decltype(dd)> du32;
  const hn::Rebind<int32_t, decltype(dd)> di32;
  const hn::Rebind<uint64_t, decltype(dd)> du64;
  const size_t N = hn::Lanes(dd), V = kScanGroup / N;
  constexpr int kMantissa = kF16 ? 10 : 7, kBias = kF16 ? 25 : 134;  // value = integer mantissa x 2^(e - kBias)
  const double sign = (begin & 0x8000u) ? -1.0 : 1.0;
  HWY_ALIGN double index[kScanGroup];
  for (uint32_t i = 0; i < kScanGroup; ++i) index[i] = i;
  hn::Vec<decltype(dd)> sum[kScanGroup], sq[kScanGroup];
  for (size_t j = 0; j < V; ++j) sum[j] = hn::LoadU(dd, lanes->sum + j * N), sq[j] = hn::LoadU(dd, lanes->sq + j * N);
  auto block = hn::Zero(du64);
  for (uint32_t g = begin; g < end; g += kScanGroup) {
    uint64_t any = 0;
    for (uint32_t k = 0; k < kScanGroup; k += 4) {
      uint64_t a, b;
      std::memcpy(&a, even + g + k, 8);
      std::memcpy(&b, odd + g + k, 8);
      any |= a | b;
    }
    if (any) {
      const uint32_t magnitude = g & 0x7FFFu, e = magnitude >> kMantissa, m = magnitude & ((1u << kMantissa) - 1);
      const double ulp = sign * pow2(static_cast<int>(e ? e : 1) - kBias);
      const double v0 = static_cast<double>((e ? 1u << kMantissa : 0u) + m) * ulp;
      const auto vulp = hn::Set(dd, ulp), d0 = hn::Set(dd, v0 - shift);
      for (size_t j = 0; j < V; ++j) {
        const uint32_t p = g + static_cast<uint32_t>(j * N);
        const auto c = hn::Add(hn::PromoteTo(du32, hn::LoadU(d16, even + p)), hn::PromoteTo(du32, hn::LoadU(d16, odd + p)));
        hn::StoreU(hn::Zero(d16), d16, even + p), hn::StoreU(hn::Zero(d16), d16, odd + p);  // left empty
        if constexpr (kTally) {
          const auto c64 = hn::PromoteTo(du64, c);
          hn::StoreU(hn::Add(hn::LoadU(du64, totals + p), c64), du64, totals + p);
          block = hn::Add(block, c64);
        }
        const auto d = hn::Add(hn::Mul(hn::Load(dd, index + j * N), vulp), d0);
        const auto cd = hn::Mul(hn::PromoteTo(dd, hn::BitCast(di32, c)), d);
        sum[j] = hn::Add(sum[j], cd);
        sq[j] = hn::Add(sq[j], hn::Mul(cd, d));
      }
    }
    if constexpr (kTally) {
      if ((g + kScanGroup) % 256 == 0 || g + kScanGroup == end) {
        HWY_ALIGN uint64_t counts[HWY_MAX_BYTES / sizeof(uint64_t)];
        hn::Store(block, du64, counts);
        for (size_t l = 0; l < N; ++l) block_counts[g >> 8] += counts[l];
        block = hn::Zero(du64);
      }
    }
  }
  for (size_t j = 0; j < V; ++j) hn::StoreU(sum[j], dd, lanes->sum + j * N), hn::StoreU(sq[j], dd, lanes->sq + j * N);
}

void ScanPatterns16(uint32_t dtype, bool tally, uint16_t* even, uint16_t* odd, uint32_t begin,
                    uint32_t end, double shift, ScanLanes* lanes, uint64_t* totals, uint64_t* block_counts) {
  const bool f16 = static_cast<DType>(dtype) == DType::F16;
  if (f16 && tally) return Scan<true, true>(even, odd, begin, end, shift, lanes, totals, block_counts);
  if (f16) return Scan<true, false>(even, odd, begin, end, shift, lanes, totals, block_counts);
  if (tally) return Scan<false, true>(even, odd, begin, end, shift, lanes, totals, block_counts);
  return Scan<false, false>(even, odd, begin, end, shift, lanes, totals, block_counts);
}

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph::cpu {

HWY_EXPORT(CountRows16);
HWY_EXPORT(ScanPatterns16);

namespace {

using pattern_tiles::kScanGroup;
using pattern_tiles::RowExtent;
using pattern_tiles::ScanLanes;

bool is_float16(DType t) { return t == DType::BF16 || t == DType::F16; }

// The stored exponent field all ones, without the sign: patterns at or above it are not finite.
uint32_t exponent_mask(DType t) { return t == DType::F16 ? 0x7C00u : 0x7F80u; }

double value16(DType t, uint32_t pattern) {
  return t == DType::F16 ? f16_to_double(static_cast<uint16_t>(pattern)) : bf16_to_double(static_cast<uint16_t>(pattern));
}

double reduce(const double* lanes) {
  double s = 0;
  for (uint32_t l = 0; l < kScanGroup; ++l) s += lanes[l];
  return s;
}

// sum d^2 - (sum d)^2 / n keeps float64 rounding relative to m2 unless cancellation took more than 10
// bits of sum d^2: then the caller sums again about the mean.
bool cancelled(double sum, double sq, double n) { return sq - sum * sum / n < sq / 1024; }

}  // namespace

bool PatternTiles::supports(DType t) {
  return is_float16(t) || t == DType::F8_E4M3FN || t == DType::F8_E5M2 || t == DType::I8 || t == DType::U8 ||
         t == DType::BOOL;
}

PatternTiles::PatternTiles(DType dtype) : dtype_(dtype), width_(dtype_size(dtype)) {
  const size_t patterns = size_t{1} << (8 * width_);
  even_.assign(patterns, 0);
  odd_.assign(patterns, 0);
  if (width_ == 1) {  // every pattern's value and order key (= its bucket), by the pyramid's own rules
    uint8_t all[256];
    for (uint32_t p = 0; p < 256; ++p) all[p] = static_cast<uint8_t>(p);
    value_.resize(256);
    key_.resize(256);
    widen_to_double(dtype, all, 256, value_.data());
    order_buckets(dtype, all, 256, key_.data());
  }
}

void PatternTiles::add_rows(const uint8_t* first, uint64_t stride, uint64_t rows, uint64_t cols) {
  if (rows == 0 || cols == 0) return;  // the caller keeps a tile at most TM_TILE_ELEMENTS (16-bit counts)
  if (!shift_set_) {  // the tile's first finite value of its first row (0 when that row has none)
    for (uint64_t i = 0; i < cols && !shift_set_; ++i) {
      double v;
      if (width_ == 2) {
        uint16_t x;
        std::memcpy(&x, first + 2 * i, 2);
        v = value16(dtype_, x);
      } else {
        v = value_[first[i]];
      }
      if (std::isfinite(v)) shift_ = v, shift_set_ = true;
    }
    shift_set_ = true;
  }
  count_ += rows * cols;
  parts_.push_back({first, stride, rows, cols});
  if (width_ == 2) {
    RowExtent e{key_min_, key_max_, mag_low_, mag_high_, non_finite_};
    HWY_DYNAMIC_DISPATCH(CountRows16)(first, stride, rows, cols, exponent_mask(dtype_), even_.data(), odd_.data(), &e);
    key_min_ = e.key_min, key_max_ = e.key_max, mag_low_ = e.mag_low, mag_high_ = e.mag_high, non_finite_ = e.non_finite;
    return;
  }
  for (uint64_t r = 0; r < rows; ++r) {
    const uint8_t* row = first + r * stride;
    uint64_t i = 0;
    for (; i + 2 <= cols; i += 2) ++even_[row[i]], ++odd_[row[i + 1]];
    if (i < cols) ++even_[row[i]];
  }
}

void PatternTiles::finish_tile(tm_tile_stats_v1& t, uint64_t* totals) {
  t = tm_tile_stats_v1{};
  t.min = std::numeric_limits<double>::infinity(), t.max = -std::numeric_limits<double>::infinity();
  totals_ = totals;
  if (width_ == 2) finish_range_scan(t, t.buckets);
  else finish_table_scan(t, t.buckets);
  totals_ = nullptr;
  parts_.clear();
  count_ = 0, shift_ = 0, shift_set_ = false;
  key_min_ = 0xFFFF, key_max_ = 0, mag_low_ = 0xFFFF, mag_high_ = 0, non_finite_ = 0;
}

void PatternTiles::finish_table_scan(tm_tile_stats_v1& t, uint32_t* buckets) {
  t.count = count_;
  double sum = 0, sq = 0;
  uint32_t min_key = 256, max_key = 0, min_p = 0, max_p = 0;
  for (uint32_t p = 0; p < 256; ++p) {
    const uint64_t c = uint64_t{even_[p]} + odd_[p];
    if (!c) continue;
    totals_[p] += c;
    const double v = value_[p];
    if (std::isnan(v)) {
      t.nan_count += c;
      continue;
    }
    if (std::isinf(v)) {
      t.inf_count += c;
      continue;
    }
    if (v == 0) t.zero_count += c;
    const double d = v - shift_, cd = static_cast<double>(c) * d;
    sum += cd, sq += cd * d;
    buckets[key_[p]] += static_cast<uint32_t>(c);
    if (key_[p] < min_key) min_key = key_[p], min_p = p;
    if (key_[p] >= max_key) max_key = key_[p], max_p = p;
    t.abs_max = std::max(t.abs_max, std::fabs(v));
  }
  const uint64_t finite = t.count - t.nan_count - t.inf_count;
  if (finite) {
    const double n = static_cast<double>(finite);
    double m2 = sq - sum * sum / n;
    if (cancelled(sum, sq, n)) {
      const double mean = shift_ + sum / n;
      double s2 = 0, q2 = 0;
      for (uint32_t p = 0; p < 256; ++p) {
        const uint64_t c = uint64_t{even_[p]} + odd_[p];
        if (!c || !std::isfinite(value_[p])) continue;
        const double d = value_[p] - mean, cd = static_cast<double>(c) * d;
        s2 += cd, q2 += cd * d;
      }
      m2 = q2 - s2 * s2 / n;
    }
    t.sum = sum + n * shift_;
    t.m2 = std::max(0.0, m2);
    t.min = value_[min_p], t.max = value_[max_p];
  }
  std::fill(even_.begin(), even_.end(), 0);
  std::fill(odd_.begin(), odd_.end(), 0);
}

void PatternTiles::finish_range_scan(tm_tile_stats_v1& t, uint32_t* buckets) {
  t.count = count_;
  const uint32_t exp_mask = exponent_mask(dtype_);
  // Zeros and the non-finite patterns one by one, then taken out of the tables so that the vector scan
  // (whose ranges may start at pattern 0) never sees them.
  auto take = [&](uint32_t p) {
    const uint64_t c = uint64_t{even_[p]} + odd_[p];
    even_[p] = odd_[p] = 0;
    totals_[p] += c;
    return c;
  };
  const uint64_t plus_zero = take(0), minus_zero = take(0x8000);
  t.zero_count = plus_zero + minus_zero;
  if (non_finite_)
    for (uint32_t p = exp_mask; p <= 0x7FFF; ++p) {
      const uint64_t c = take(p) + take(p | 0x8000);
      (p == exp_mask ? t.inf_count : t.nan_count) += c;
    }
  const uint64_t finite = t.count - t.nan_count - t.inf_count;
  if (finite == 0) return;
  buckets[bucket_of_top_byte(0x00)] += static_cast<uint32_t>(plus_zero);
  buckets[bucket_of_top_byte(0x80)] += static_cast<uint32_t>(minus_zero);

  const double n = static_cast<double>(finite);
  const bool scan = mag_low_ <= mag_high_;  // a finite value other than zero
  const uint32_t begin = mag_low_ & ~(kScanGroup - 1), end = (mag_high_ | (kScanGroup - 1)) + 1;
  // Sums of d and d^2 about `shift` over the finite values; the scan leaves the tables empty.
  auto sums_about = [&](double shift, bool tally, double& sum, double& sq) {
    const double z = static_cast<double>(t.zero_count);
    sum = z * (0.0 - shift), sq = z * shift * shift;
    if (!scan) return;
    ScanLanes lanes{};
    uint64_t blocks[256] = {};
    for (uint32_t sign : {0u, 0x8000u})
      HWY_DYNAMIC_DISPATCH(ScanPatterns16)(static_cast<uint32_t>(dtype_), tally, even_.data(), odd_.data(),
                                           begin | sign, end | sign, shift, &lanes, totals_, blocks);
    sum += reduce(lanes.sum), sq += reduce(lanes.sq);
    if (tally)
      for (uint32_t b = 0; b < 256; ++b)
        if (blocks[b]) buckets[bucket_of_top_byte(b)] += static_cast<uint32_t>(blocks[b]);
  };
  double sum, sq;
  sums_about(shift_, true, sum, sq);
  double m2 = sq - sum * sum / n;
  if (cancelled(sum, sq, n)) {
    // Rare (the first value lies far from the rest): the tile's rows, still in memory, are counted
    // again and summed about the mean.
    RowExtent scratch{0xFFFF, 0, 0xFFFF, 0, 0};
    for (const Part& part : parts_)
      HWY_DYNAMIC_DISPATCH(CountRows16)(part.first, part.stride, part.rows, part.cols, exp_mask, even_.data(),
                                        odd_.data(), &scratch);
    for (uint32_t sign : {0u, 0x8000u}) {
      even_[sign] = odd_[sign] = 0;
      for (uint32_t p = exp_mask; p <= 0x7FFF; ++p) even_[p | sign] = odd_[p | sign] = 0;
    }
    double s2, q2;
    sums_about(shift_ + sum / n, false, s2, q2);
    m2 = q2 - s2 * s2 / n;
  }
  t.sum = sum + n * shift_;
  t.m2 = std::max(0.0, m2);
  const auto pattern_of_key = [](uint32_t k) { return k & 0x8000 ? k ^ 0x8000u : ~k & 0xFFFFu; };
  t.min = value16(dtype_, pattern_of_key(key_min_));
  t.max = value16(dtype_, pattern_of_key(key_max_));
  t.abs_max = value16(dtype_, mag_high_);
}

}  // namespace tmorph::cpu
#endif  // HWY_ONCE
