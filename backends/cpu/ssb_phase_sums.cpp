// add_phase_sums (ssb_phase_sums.h): Highway's dynamic dispatch picks the widest float64 target.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ssb_phase_sums.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstdint>

#include "ssb_phase_sums.h"
#include "support/fast_atan2.h"

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// fast_atan2 (support/fast_atan2.h) lane by lane: the same operations in the same order, selects for branches.
template <class D, class V = hn::Vec<D>>
HWY_INLINE V atan2_lanes(D d, V y, V x) {
  const hn::RebindToSigned<D> di;
  const V zero = hn::Zero(d), one = hn::Set(d, 1.0);
  const V ax = hn::Abs(x), ay = hn::Abs(y);
  const V hi = hn::Max(ax, ay), lo = hn::Min(ax, ay);
  const V t = hn::IfThenElse(hn::Gt(hi, zero), hn::Div(lo, hi), zero);
  const auto reduce = hn::Gt(t, hn::Set(d, 0.41421356237309503));
  const V r = hn::IfThenElse(reduce, hn::Div(hn::Sub(t, one), hn::Add(t, one)), t);
  const V r2 = hn::Mul(r, r);
  V p = hn::Set(d, 1.0 / 21);
  p = hn::Sub(hn::Mul(p, r2), hn::Set(d, 1.0 / 19));
  p = hn::Add(hn::Mul(p, r2), hn::Set(d, 1.0 / 17));
  p = hn::Sub(hn::Mul(p, r2), hn::Set(d, 1.0 / 15));
  p = hn::Add(hn::Mul(p, r2), hn::Set(d, 1.0 / 13));
  p = hn::Sub(hn::Mul(p, r2), hn::Set(d, 1.0 / 11));
  p = hn::Add(hn::Mul(p, r2), hn::Set(d, 1.0 / 9));
  p = hn::Sub(hn::Mul(p, r2), hn::Set(d, 1.0 / 7));
  p = hn::Add(hn::Mul(p, r2), hn::Set(d, 1.0 / 5));
  p = hn::Sub(hn::Mul(p, r2), hn::Set(d, 1.0 / 3));
  p = hn::Add(hn::Mul(p, r2), one);
  V a = hn::Add(hn::IfThenElseZero(reduce, hn::Set(d, M_PI_4)), hn::Mul(r, p));
  a = hn::IfThenElse(hn::Gt(ay, ax), hn::Sub(hn::Set(d, M_PI_2), a), a);
  const auto x_negative = hn::RebindMask(d, hn::Lt(hn::BitCast(di, x), hn::Zero(di)));  // std::signbit
  a = hn::IfThenElse(x_negative, hn::Sub(hn::Set(d, M_PI), a), a);
  return hn::CopySign(a, y);
}

void AddPhaseSums(const float* o, uint64_t n, double inv_n, double* sums) {
  const hn::ScalableTag<double> d;
  const hn::Rebind<float, decltype(d)> df;
  const size_t lanes = hn::Lanes(d);
  const auto scale = hn::Set(d, inv_n);
  uint64_t q = 0;
  for (; q + lanes <= n; q += lanes) {
    hn::Vec<decltype(df)> re_f, im_f;
    hn::LoadInterleaved2(df, o + 2 * q, re_f, im_f);
    const auto re = hn::Mul(hn::PromoteTo(d, re_f), scale), im = hn::Mul(hn::PromoteTo(d, im_f), scale);
    const auto a = atan2_lanes(d, im, re);
    hn::Vec<decltype(d)> s0, s1, s2, s3;
    hn::LoadInterleaved4(d, sums + 4 * q, s0, s1, s2, s3);
    hn::StoreInterleaved4(hn::Add(s0, re), hn::Add(s1, im), hn::Add(s2, a), hn::Add(s3, hn::Mul(a, a)), d, sums + 4 * q);
  }
  for (; q < n; ++q) {  // the tail: the scalar loop
    const double re = o[2 * q] * inv_n, im = o[2 * q + 1] * inv_n;
    const double a = fast_atan2(im, re);
    double* s = sums + 4 * q;
    s[0] += re, s[1] += im, s[2] += a, s[3] += a * a;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph::cpu {
HWY_EXPORT(AddPhaseSums);

void add_phase_sums(const float* o, uint64_t n, double inv_n, double* sums) {
  HWY_DYNAMIC_DISPATCH(AddPhaseSums)(o, n, inv_n, sums);
}
}  // namespace tmorph::cpu
#endif  // HWY_ONCE
