// fill_quadratic_plane (ssb_quadratic_plane.h): Highway's dynamic dispatch picks the widest float64 target. Each row
// is two runs of columns: j < cols/2 + 1 reads G's half directly, the rest reads it mirrored (a reversed load of
// the row (rows − i) mod rows) and conjugated; the columns left over at each run's end take the scalar reference.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ssb_quadratic_plane.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>

#include "ssb_quadratic_plane.h"

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void FillQuadraticPlane(const QuadraticPlane& a, float* plane) {
  const hn::ScalableTag<double> d;
  const hn::Rebind<float, decltype(d)> df;
  using V = hn::Vec<decltype(d)>;
  const uint64_t L = hn::Lanes(d), C = a.cols, half = C / 2 + 1;
  const V kr = hn::Set(d, a.kr), kc = hn::Set(d, a.kc), kmax2 = hn::Set(d, a.kmax2);
  const V tiny = hn::Set(d, 1e-8), two = hn::Set(d, 2.0);
  for (uint64_t i = 0; i < a.rows; ++i) {
    const V rr = hn::Set(d, a.row_factor[2 * i]), ri = hn::Set(d, a.row_factor[2 * i + 1]);
    const uint64_t mirror_row = ((a.rows - i) % a.rows) * half;
    // Lanes j .. j + L − 1 of row i, all on one side of half (mirrored: G read at mirror_row + C − j, descending).
    const auto lanes_at = [&](uint64_t j, bool mirrored) {
      const uint64_t q = i * C + j;
      V nur, nuc;
      hn::LoadInterleaved2(d, a.nu + 2 * q, nur, nuc);
      const V mr = hn::Sub(kr, nur), mc = hn::Sub(kc, nuc), pr = hn::Add(kr, nur), pc = hn::Add(kc, nuc);
      const auto minus = hn::Le(hn::Add(hn::Mul(mr, mr), hn::Mul(mc, mc)), kmax2);
      const auto plus = hn::Le(hn::Add(hn::Mul(pr, pr), hn::Mul(pc, pc)), kmax2);
      hn::Vec<decltype(df)> gr_f, gi_f;
      V g_re, g_im;
      if (!mirrored) {
        hn::LoadInterleaved2(df, a.g_half + 2 * (i * half + j), gr_f, gi_f);
        g_re = hn::PromoteTo(d, gr_f), g_im = hn::PromoteTo(d, gi_f);
      } else {
        hn::LoadInterleaved2(df, a.g_half + 2 * (mirror_row + C - (j + L - 1)), gr_f, gi_f);
        g_re = hn::Reverse(d, hn::PromoteTo(d, gr_f)), g_im = hn::Neg(hn::Reverse(d, hn::PromoteTo(d, gi_f)));
      }
      V cr, ci, e_re, e_im;
      hn::LoadInterleaved2(d, a.col_factor + 2 * j, cr, ci);
      hn::LoadInterleaved2(d, a.e_chi + 2 * q, e_re, e_im);
      const V f_re = hn::Sub(hn::Mul(rr, cr), hn::Mul(ri, ci)), f_im = hn::Add(hn::Mul(rr, ci), hn::Mul(ri, cr));
      const V t_re = hn::Sub(hn::Mul(g_re, f_re), hn::Mul(g_im, f_im)), t_im = hn::Add(hn::Mul(g_re, f_im), hn::Mul(g_im, f_re));
      const auto both = hn::And(minus, plus);
      const V two_sin = hn::Mul(two, e_im);
      const V w_re = hn::IfThenElseZero(hn::AndNot(both, minus), e_re);
      const V w_re_all = hn::IfThenElse(hn::AndNot(minus, plus), hn::Neg(e_re), w_re);  // −e_re where k + ν only
      const V w_im = hn::IfThenElse(both, hn::Div(two_sin, hn::Max(hn::Abs(two_sin), tiny)), e_im);
      const auto any = hn::Or(minus, plus);
      const V o_re = hn::IfThenElseZero(any, hn::Sub(hn::Mul(t_re, w_re_all), hn::Mul(t_im, w_im)));
      const V o_im = hn::IfThenElseZero(any, hn::Add(hn::Mul(t_re, w_im), hn::Mul(t_im, w_re_all)));
      hn::StoreInterleaved2(hn::DemoteTo(df, o_re), hn::DemoteTo(df, o_im), df, plane + 2 * q);
    };
    uint64_t j = 0;
    for (; j + L <= half; j += L) lanes_at(j, false);
    for (; j < half; ++j) quadratic_value(a, i, j, plane + 2 * (i * C + j));
    for (; j + L <= C; j += L) lanes_at(j, true);
    for (; j < C; ++j) quadratic_value(a, i, j, plane + 2 * (i * C + j));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph::cpu {
HWY_EXPORT(FillQuadraticPlane);

void fill_quadratic_plane(const QuadraticPlane& a, float* plane) { HWY_DYNAMIC_DISPATCH(FillQuadraticPlane)(a, plane); }
}  // namespace tmorph::cpu
#endif  // HWY_ONCE
