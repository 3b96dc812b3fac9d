// Display transforms and normalisation to [0, 1]: the first half of the display kernels' contract.
//
// Contract (all arithmetic in float64; the goldens in tests/goldens/display/ come from an independent
// numpy + matplotlib script, tests/tools/display_goldens.py):
// - Transforms: linear t(x) = x; log t(x) = log10(max(|x|, floor)) with floor > 0 (default 1e-12);
//   signed-log t(x) = sign(x) * log1p(|x|). std::log10 and std::log1p (the C library's).
// - Limits lo <= hi are in DATA units (before the transform). n = (t(x) - t(lo)) / (t(hi) - t(lo)),
//   clamped to [0, 1]. When t(hi) - t(lo) overflows float64 (linear limits near ±DBL_MAX) the three
//   terms are halved first: n = (x/2 - lo/2) / (hi/2 - lo/2), equal to the plain formula wherever that
//   one is finite (halving is exact above the subnormals).
// - Collapsed range (t(hi) == t(lo)): n = 0.5 for every finite x.
// - NaN -> invalid (normalize returns NaN). +Inf -> 1, -Inf -> 0; under log both ±Inf -> 1 (|x| = Inf).
//   These hold for a collapsed range too.
// - Automatic limits: the finite min and max of the inputs (NaN and ±Inf ignored; none finite: lo = hi = 0).
//   Under log, whose t depends on |x| only, they are the min and max of |x| over the finite inputs, so
//   every finite input lies inside [t(lo), t(hi)]. For a diverging colour map under linear or signed-log
//   with lo < 0 < hi, the limits become ±max(|lo|, |hi|) so that 0 maps to n = 0.5 (t is odd);
//   log has no sign and is never centred.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <string_view>

namespace tmorph {

enum class Transform { Linear, Log, SignedLog };

inline constexpr double kDefaultLogFloor = 1e-12;

// "linear", "log", "signed-log" (exact, lower case). Throws Error(InvalidArgument) naming the known ones.
Transform parse_transform(std::string_view name);
std::string_view transform_name(Transform t);

// t(x) as above. `log_floor` is used by Log only; the caller guarantees it is finite and > 0.
inline double apply_transform(double x, Transform t, double log_floor = kDefaultLogFloor) {
  switch (t) {
    case Transform::Linear: return x;
    case Transform::Log: return std::log10(std::fmax(std::fabs(x), log_floor));
    case Transform::SignedLog: return std::copysign(std::log1p(std::fabs(x)), x);
  }
  return x;
}

// Display limits in data units.
struct Limits {
  double lo = 0, hi = 0;
};

// Automatic limits of values[0..n) for transform t (see the contract); `diverging` centres them.
Limits auto_limits(const double* values, size_t n, Transform t, bool diverging);

// Throws Error(InvalidArgument) unless lo and hi are finite, log_floor is finite and > 0, lo <= hi and
// t(lo) <= t(hi) (the last can fail only under log, e.g. lo = -5, hi = 3).
void validate_limits(const Limits& limits, Transform t, double log_floor);

// A normalisation prepared once per tile: t(lo), t(hi) and the overflow scale are computed here so that
// the per-value work is one transform, one subtraction and one division. The constructor validates the
// limits (validate_limits).
class Normalizer {
 public:
  Normalizer(const Limits& limits, Transform t, double log_floor);
  Transform transform() const { return transform_; }
  // The prepared terms, for kernels that inline the formula: n = (t(x) * scale() - tlo()) / range().
  double scale() const { return scale_; }
  double tlo() const { return tlo_; }
  double range() const { return range_; }
  bool collapsed() const { return collapsed_; }
  // n in [0, 1], or NaN for a NaN input.
  double operator()(double x) const {
    if (x != x) return x;
    if (x == kInf) return 1.0;
    if (x == -kInf) return transform_ == Transform::Log ? 1.0 : 0.0;
    if (collapsed_) return 0.5;
    const double n = (apply_transform(x, transform_, log_floor_) * scale_ - tlo_) / range_;
    return n < 0.0 ? 0.0 : (n > 1.0 ? 1.0 : n);
  }

 private:
  static constexpr double kInf = std::numeric_limits<double>::infinity();
  Transform transform_;
  double log_floor_;
  double scale_ = 1.0;  // 0.5 when t(hi) - t(lo) overflows
  double tlo_ = 0.0;    // t(lo) * scale_
  double range_ = 0.0;  // t(hi) * scale_ - t(lo) * scale_
  bool collapsed_ = false;
};

// n for one value: Normalizer(limits, t, log_floor)(x) (so it validates the limits).
double normalize(double x, const Limits& limits, Transform t, double log_floor = kDefaultLogFloor);

}  // namespace tmorph
