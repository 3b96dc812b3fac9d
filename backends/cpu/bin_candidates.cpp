#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bin_candidates.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cmath>
#include <cstring>

#include "bin_candidates.h"

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <bool kIsF32>
void Candidates(const uint8_t* data, uint64_t n, double lo, double scale, double margin, uint32_t bins, int32_t* out) {
  const hn::ScalableTag<double> d;
  const hn::Rebind<int32_t, decltype(d)> di;
  const size_t N = hn::Lanes(d);
  const auto vlo = hn::Set(d, lo), vscale = hn::Set(d, scale), vbins = hn::Set(d, static_cast<double>(bins));
  const auto vmargin = hn::Set(d, margin), vupper = hn::Set(d, 1.0 - margin);
  const auto vsentinel = hn::Set(d, static_cast<double>(kNeedsExactBin));
  uint64_t i = 0;
  for (; i + N <= n; i += N) {
    hn::Vec<decltype(d)> x;
    if constexpr (kIsF32) x = hn::PromoteTo(d, hn::LoadU(hn::Rebind<float, decltype(d)>(), reinterpret_cast<const float*>(data) + i));
    else x = hn::LoadU(d, reinterpret_cast<const double*>(data) + i);
    const auto t = hn::Mul(hn::Sub(x, vlo), vscale);
    const auto j = hn::Floor(t);
    const auto frac = hn::Sub(t, j);
    // NaN fails every comparison, so it (and ±Inf, out of range) goes to the exact path.
    const auto certain = hn::And(hn::And(hn::Ge(t, hn::Zero(d)), hn::Lt(t, vbins)),
                                 hn::And(hn::Gt(frac, vmargin), hn::Lt(frac, vupper)));
    // Uncertain lanes become the sentinel before the conversion, which also keeps it in range.
    hn::StoreU(hn::DemoteTo(di, hn::IfThenElse(certain, j, vsentinel)), di, out + i);
  }
  for (; i < n; ++i) out[i] = kNeedsExactBin;  // the few leftovers take the exact path
}

void CandidateBins(uint32_t is_f32, const uint8_t* data, uint64_t n, double lo, double scale, double margin,
                   uint32_t bins, int32_t* out) {
  if (is_f32) Candidates<true>(data, n, lo, scale, margin, bins, out);
  else Candidates<false>(data, n, lo, scale, margin, bins, out);
}

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph::cpu {
HWY_EXPORT(CandidateBins);

void candidate_bins(DType dtype, const uint8_t* data, uint64_t n, double lo, double scale, double margin,
                    uint32_t bins, int32_t* out) {
  HWY_DYNAMIC_DISPATCH(CandidateBins)(dtype == DType::F32 ? 1u : 0u, data, n, lo, scale, margin, bins, out);
}

}  // namespace tmorph::cpu
#endif
