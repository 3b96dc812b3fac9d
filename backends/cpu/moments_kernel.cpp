// SIMD (Highway, dynamic dispatch) block moments for floating dtypes; scalar for integers.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "moments_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "block_contract.h"
#include "moments_kernel.h"
#include "support/simd_f32_loaders-inl.h"
#include "tensormorph/contract_math.h"

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The f32 loaders (LoadF32, LoadBF16, LoadF16, LoadF8E5M2, LoadF8E4M3FN) are shared with the pyramid's
// tile kernels: support/simd_f32_loaders-inl.h.
using tmorph::HWY_NAMESPACE::LoadBF16;
using tmorph::HWY_NAMESPACE::LoadF16;
using tmorph::HWY_NAMESPACE::LoadF32;
using tmorph::HWY_NAMESPACE::LoadF8E4M3FN;
using tmorph::HWY_NAMESPACE::LoadF8E5M2;

// Lanes(d) consecutive elements as f64.
struct LoadF64 {
  template <class D> static hn::Vec<D> Wide(D d, const uint8_t* p) {
    return hn::LoadU(d, reinterpret_cast<const double*>(p));
  }
};
template <class Narrow>
struct Widened {
  template <class D> static hn::Vec<D> Wide(D d, const uint8_t* p) {
    return hn::PromoteTo(d, Narrow::Load(hn::Rebind<float, D>(), p));
  }
};

template <class Loader>
void FloatBlock(const uint8_t* data, uint64_t count, DType dtype, tm_moments_partial_v1* out) {
  const hn::CappedTag<double, TM_STATS_LANES> d;
  const size_t N = hn::Lanes(d);
  const size_t V = TM_STATS_LANES / N;  // vectors per group of 16 elements
  const size_t width = dtype_size(dtype);
  const auto inf = hn::Set(d, std::numeric_limits<double>::infinity());
  const auto zero = hn::Zero(d);

  // Squares are exact in double for every float narrower than f64: those take the single-pass m2.
  constexpr bool kSquares = !std::is_same_v<Loader, LoadF64>;
  hn::Vec<decltype(d)> sum[TM_STATS_LANES], sq[TM_STATS_LANES], lo[TM_STATS_LANES], hi[TM_STATS_LANES],
      amax[TM_STATS_LANES];
  for (size_t j = 0; j < V; ++j) sum[j] = zero, sq[j] = zero, lo[j] = inf, hi[j] = hn::Neg(inf), amax[j] = zero;
  uint64_t nan = 0, finite = 0, zeros = 0;
  const uint64_t groups = count / TM_STATS_LANES;
  for (uint64_t g = 0; g < groups; ++g) {
    for (size_t j = 0; j < V; ++j) {
      const auto x = Loader::Wide(d, data + (g * TM_STATS_LANES + j * N) * width);
      const auto a = hn::Abs(x);
      const auto is_finite = hn::Lt(a, inf);
      nan += hn::CountTrue(d, hn::IsNaN(x));
      finite += hn::CountTrue(d, is_finite);
      zeros += hn::CountTrue(d, hn::Eq(x, zero));
      const auto xf = hn::IfThenElseZero(is_finite, x);
      sum[j] = hn::Add(sum[j], xf);
      if constexpr (kSquares) sq[j] = hn::Add(sq[j], hn::Mul(xf, xf));
      lo[j] = hn::Min(lo[j], hn::IfThenElse(is_finite, x, inf));
      hi[j] = hn::Max(hi[j], hn::IfThenElse(is_finite, x, hn::Neg(inf)));
      amax[j] = hn::Max(amax[j], hn::IfThenElseZero(is_finite, a));
    }
  }
  HWY_ALIGN double lane_sum[TM_STATS_LANES], lane_sq[TM_STATS_LANES];
  double mn = std::numeric_limits<double>::infinity(), mx = -mn, am = 0;
  for (size_t j = 0; j < V; ++j) {
    hn::Store(sum[j], d, lane_sum + j * N);
    hn::Store(sq[j], d, lane_sq + j * N);
    mn = std::min(mn, hn::GetLane(hn::MinOfLanes(d, lo[j])));
    mx = std::max(mx, hn::GetLane(hn::MaxOfLanes(d, hi[j])));
    am = std::max(am, hn::GetLane(hn::MaxOfLanes(d, amax[j])));
  }
  BlockExtremes e{nan, zeros, finite, mn, mx, am};
  add_tail_moments(dtype, data, groups * TM_STATS_LANES, count, lane_sum, kSquares ? lane_sq : nullptr, &e);
  set_block_partial(out, count, e, lane_sum);
  const double mean = out->mean;
  if (kSquares && single_pass_m2(out->sum, reduce_lanes(lane_sq), mean, &out->m2)) return;

  // Second pass over the (cache-resident) block: m2 around the block mean.
  const auto vmean = hn::Set(d, mean);
  hn::Vec<decltype(d)> m2[TM_STATS_LANES];
  for (size_t j = 0; j < V; ++j) m2[j] = zero;
  for (uint64_t g = 0; g < groups; ++g) {
    for (size_t j = 0; j < V; ++j) {
      const auto x = Loader::Wide(d, data + (g * TM_STATS_LANES + j * N) * width);
      const auto dev = hn::IfThenElseZero(hn::Lt(hn::Abs(x), inf), hn::Sub(x, vmean));
      m2[j] = hn::Add(m2[j], hn::Mul(dev, dev));
    }
  }
  HWY_ALIGN double lane_m2[TM_STATS_LANES];
  for (size_t j = 0; j < V; ++j) hn::Store(m2[j], d, lane_m2 + j * N);
  add_tail_m2(dtype, data, groups * TM_STATS_LANES, count, mean, lane_m2);
  out->m2 = reduce_lanes(lane_m2);
}

#if HWY_TARGET != HWY_SCALAR
// Narrow path for f32 and smaller floats: min, max, abs_max and the counts in f32 lanes (exact: every
// value is an f32), sums and m2 in f64 after promoting each half of the f32 vector. The halves land
// in consecutive f64 accumulators, so element i of a 16-group still feeds virtual lane i.
//
// kMasked = false is the fast path for blocks without NaN or ±Inf (nearly all real data): no masking.
// It returns false as soon as pass 1 shows a non-finite value, and the caller reruns the block
// masked. Both give the same results on an all-finite block.
template <class Loader, bool kMasked>
bool NarrowBlock(const uint8_t* data, uint64_t count, DType dtype, tm_moments_partial_v1* out) {
  const hn::CappedTag<float, TM_STATS_LANES> df;
  const hn::Half<decltype(df)> dh;
  const hn::Rebind<double, decltype(dh)> dd;
  const hn::Rebind<int32_t, decltype(df)> di;
  const size_t N = hn::Lanes(df), H = hn::Lanes(dd);
  const size_t V = TM_STATS_LANES / N;  // f32 vectors per group of 16 elements
  const size_t width = dtype_size(dtype);
  const auto inf = hn::Set(df, std::numeric_limits<float>::infinity());
  const auto ninf = hn::Neg(inf);

  auto lo = inf, hi = ninf, amax = hn::Zero(df);
  auto nan = hn::Zero(di), finite = hn::Zero(di), zeros = hn::Zero(di);
  hn::Vec<decltype(dd)> sum[2 * TM_STATS_LANES], sq[2 * TM_STATS_LANES];
  for (size_t j = 0; j < 2 * V; ++j) sum[j] = hn::Zero(dd), sq[j] = hn::Zero(dd);
  const uint64_t groups = count / TM_STATS_LANES;
  for (uint64_t g = 0; g < groups; ++g) {
    for (size_t j = 0; j < V; ++j) {
      const auto x = Loader::Load(df, data + (g * TM_STATS_LANES + j * N) * width);
      const auto a = hn::Abs(x);
      const auto is_finite = hn::Lt(a, inf);
      finite = hn::Sub(finite, hn::BitCast(di, hn::VecFromMask(df, is_finite)));
      zeros = hn::Sub(zeros, hn::BitCast(di, hn::VecFromMask(df, hn::Eq(x, hn::Zero(df)))));
      if constexpr (kMasked) {
        nan = hn::Sub(nan, hn::BitCast(di, hn::VecFromMask(df, hn::IsNaN(x))));
        lo = hn::Min(lo, hn::IfThenElse(is_finite, x, inf));
        hi = hn::Max(hi, hn::IfThenElse(is_finite, x, ninf));
        amax = hn::Max(amax, hn::IfThenElseZero(is_finite, a));
      } else {
        lo = hn::Min(lo, x), hi = hn::Max(hi, x), amax = hn::Max(amax, a);
      }
      const auto xf = kMasked ? hn::IfThenElseZero(is_finite, x) : x;
      const auto x0 = hn::PromoteTo(dd, hn::LowerHalf(dh, xf)), x1 = hn::PromoteTo(dd, hn::UpperHalf(dh, xf));
      sum[2 * j] = hn::Add(sum[2 * j], x0);
      sum[2 * j + 1] = hn::Add(sum[2 * j + 1], x1);
      sq[2 * j] = hn::Add(sq[2 * j], hn::Mul(x0, x0));
      sq[2 * j + 1] = hn::Add(sq[2 * j + 1], hn::Mul(x1, x1));
    }
  }
  HWY_ALIGN double lane_sum[TM_STATS_LANES], lane_sq[TM_STATS_LANES];
  for (size_t j = 0; j < 2 * V; ++j) hn::Store(sum[j], dd, lane_sum + j * H), hn::Store(sq[j], dd, lane_sq + j * H);
  uint64_t n_nan = static_cast<uint64_t>(hn::GetLane(hn::SumOfLanes(di, nan)));
  uint64_t n_finite = static_cast<uint64_t>(hn::GetLane(hn::SumOfLanes(di, finite)));
  if (!kMasked && n_finite != groups * TM_STATS_LANES) return false;
  uint64_t n_zero = static_cast<uint64_t>(hn::GetLane(hn::SumOfLanes(di, zeros)));
  double mn = hn::GetLane(hn::MinOfLanes(df, lo)), mx = hn::GetLane(hn::MaxOfLanes(df, hi));
  double am = hn::GetLane(hn::MaxOfLanes(df, amax));
  BlockExtremes e{n_nan, n_zero, n_finite, mn, mx, am};
  add_tail_moments(dtype, data, groups * TM_STATS_LANES, count, lane_sum, lane_sq, &e);
  set_block_partial(out, count, e, lane_sum);
  const double mean = out->mean;
  if (single_pass_m2(out->sum, reduce_lanes(lane_sq), mean, &out->m2)) return true;

  // Second pass over the (cache-resident) block: m2 around the block mean. A non-finite x gives a
  // non-finite square, which the mask drops.
  const auto vmean = hn::Set(dd, mean);
  const auto dinf = hn::Set(dd, std::numeric_limits<double>::infinity());
  hn::Vec<decltype(dd)> m2[2 * TM_STATS_LANES];
  for (size_t j = 0; j < 2 * V; ++j) m2[j] = hn::Zero(dd);
  for (uint64_t g = 0; g < groups; ++g) {
    for (size_t j = 0; j < V; ++j) {
      const auto x = Loader::Load(df, data + (g * TM_STATS_LANES + j * N) * width);
      const auto d0 = hn::Sub(hn::PromoteTo(dd, hn::LowerHalf(dh, x)), vmean);
      const auto d1 = hn::Sub(hn::PromoteTo(dd, hn::UpperHalf(dh, x)), vmean);
      const auto s0 = hn::Mul(d0, d0), s1 = hn::Mul(d1, d1);
      if constexpr (kMasked) {
        m2[2 * j] = hn::Add(m2[2 * j], hn::IfThenElseZero(hn::Lt(s0, dinf), s0));
        m2[2 * j + 1] = hn::Add(m2[2 * j + 1], hn::IfThenElseZero(hn::Lt(s1, dinf), s1));
      } else {
        m2[2 * j] = hn::Add(m2[2 * j], s0);
        m2[2 * j + 1] = hn::Add(m2[2 * j + 1], s1);
      }
    }
  }
  HWY_ALIGN double lane_m2[TM_STATS_LANES];
  for (size_t j = 0; j < 2 * V; ++j) hn::Store(m2[j], dd, lane_m2 + j * H);
  add_tail_m2(dtype, data, groups * TM_STATS_LANES, count, mean, lane_m2);
  out->m2 = reduce_lanes(lane_m2);
  return true;
}

template <class Loader>
void NarrowBlockAnyData(const uint8_t* data, uint64_t count, DType dtype, tm_moments_partial_v1* out) {
  if (!NarrowBlock<Loader, false>(data, count, dtype, out)) NarrowBlock<Loader, true>(data, count, dtype, out);
}
#endif

void FloatBlockMoments(uint32_t dtype, const uint8_t* data, uint64_t count, tm_moments_partial_v1* out) {
#if HWY_TARGET == HWY_SCALAR
  // One-lane target: the f64 path is the contract written out.
  switch (static_cast<DType>(dtype)) {
    case DType::F64: return FloatBlock<LoadF64>(data, count, DType::F64, out);
    case DType::F32: return FloatBlock<Widened<LoadF32>>(data, count, DType::F32, out);
    case DType::F16: return FloatBlock<Widened<LoadF16>>(data, count, DType::F16, out);
    case DType::BF16: return FloatBlock<Widened<LoadBF16>>(data, count, DType::BF16, out);
    case DType::F8_E5M2: return FloatBlock<Widened<LoadF8E5M2>>(data, count, DType::F8_E5M2, out);
    case DType::F8_E4M3FN: return FloatBlock<Widened<LoadF8E4M3FN>>(data, count, DType::F8_E4M3FN, out);
    default: return;
  }
#else
  switch (static_cast<DType>(dtype)) {
    case DType::F64: return FloatBlock<LoadF64>(data, count, DType::F64, out);
    case DType::F32: return NarrowBlockAnyData<LoadF32>(data, count, DType::F32, out);
    case DType::F16: return NarrowBlockAnyData<LoadF16>(data, count, DType::F16, out);
    case DType::BF16: return NarrowBlockAnyData<LoadBF16>(data, count, DType::BF16, out);
    case DType::F8_E5M2: return NarrowBlockAnyData<LoadF8E5M2>(data, count, DType::F8_E5M2, out);
    case DType::F8_E4M3FN: return NarrowBlockAnyData<LoadF8E4M3FN>(data, count, DType::F8_E4M3FN, out);
    default: return;
  }
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph::cpu {
HWY_EXPORT(FloatBlockMoments);

namespace {

// Integers: exact extremes and 128-bit sum; m2 in double around the exact mean, 16 lanes like floats.
template <class T>
void IntBlock(const uint8_t* data, uint64_t count, bool is_bool, tm_moments_partial_v1* out) {
  __int128 sum = 0;
  T lo = std::numeric_limits<T>::max(), hi = std::numeric_limits<T>::min();
  uint64_t zeros = 0;
  for (uint64_t i = 0; i < count; ++i) {
    T x;
    std::memcpy(&x, data + i * sizeof(T), sizeof(T));
    if (is_bool) x = x ? 1 : 0;
    sum += x;
    lo = x < lo ? x : lo;
    hi = x > hi ? x : hi;
    zeros += x == 0;
  }
  // A sum within 2^53 is exact in double, and one double division rounds the exact quotient once
  // (what a GPU kernel can do too); wider sums go through long double.
  constexpr __int128 kExactInDouble = __int128{1} << 53;
  const double mean = count == 0 ? 0.0
                      : (sum < kExactInDouble && sum > -kExactInDouble)
                          ? static_cast<double>(sum) / static_cast<double>(count)
                          : static_cast<double>(static_cast<long double>(sum) / static_cast<long double>(count));
  double lanes[TM_STATS_LANES] = {};
  for (uint64_t i = 0; i < count; ++i) {
    T x;
    std::memcpy(&x, data + i * sizeof(T), sizeof(T));
    if (is_bool) x = x ? 1 : 0;
    const double dev = static_cast<double>(x) - mean;
    lanes[i % TM_STATS_LANES] += dev * dev;
  }
  *out = empty_moments();
  out->count = out->finite_count = count;
  out->zero_count = zeros;
  if (count == 0) return;
  out->min = static_cast<double>(lo), out->max = static_cast<double>(hi);
  out->abs_max = std::max(std::fabs(out->min), std::fabs(out->max));
  out->sum = static_cast<double>(static_cast<long double>(sum));
  out->mean = mean;
  out->m2 = reduce_lanes(lanes);
  if constexpr (std::numeric_limits<T>::is_signed) {
    out->int_min = lo, out->int_max = hi;
  } else {
    out->uint_min = lo, out->uint_max = hi;
  }
  out->int_sum_lo = static_cast<uint64_t>(static_cast<unsigned __int128>(sum));
  out->int_sum_hi = static_cast<int64_t>(static_cast<unsigned __int128>(sum) >> 64);
}

}  // namespace

tm_moments_partial_v1 block_moments(DType dtype, const void* data, uint64_t count) {
  tm_moments_partial_v1 out = empty_moments();
  const auto* p = static_cast<const uint8_t*>(data);
  switch (dtype) {
    case DType::I8: IntBlock<int8_t>(p, count, false, &out); break;
    case DType::I16: IntBlock<int16_t>(p, count, false, &out); break;
    case DType::I32: IntBlock<int32_t>(p, count, false, &out); break;
    case DType::I64: IntBlock<int64_t>(p, count, false, &out); break;
    case DType::U8: IntBlock<uint8_t>(p, count, false, &out); break;
    case DType::U16: IntBlock<uint16_t>(p, count, false, &out); break;
    case DType::U32: IntBlock<uint32_t>(p, count, false, &out); break;
    case DType::U64: IntBlock<uint64_t>(p, count, false, &out); break;
    case DType::BOOL: IntBlock<uint8_t>(p, count, true, &out); break;
    default:
      HWY_DYNAMIC_DISPATCH(FloatBlockMoments)(static_cast<uint32_t>(dtype), p, count, &out);
      break;
  }
  return out;
}

}  // namespace tmorph::cpu
#endif  // HWY_ONCE
