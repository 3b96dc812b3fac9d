#include "display/transform.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "tensormorph/error.h"

namespace tmorph {
namespace {

// A double for messages (10 significant digits).
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

}  // namespace

Transform parse_transform(std::string_view name) {
  if (name == "linear") return Transform::Linear;
  if (name == "log") return Transform::Log;
  if (name == "signed-log") return Transform::SignedLog;
  throw Error(ErrorKind::InvalidArgument,
              "unknown display transform '" + std::string(name) + "' (known: linear, log, signed-log)");
}

std::string_view transform_name(Transform t) {
  switch (t) {
    case Transform::Linear: return "linear";
    case Transform::Log: return "log";
    case Transform::SignedLog: return "signed-log";
  }
  return "?";
}

Limits auto_limits(const double* values, size_t n, Transform t, bool diverging) {
  const bool by_magnitude = t == Transform::Log;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (size_t i = 0; i < n; ++i) {
    const double x = by_magnitude ? std::fabs(values[i]) : values[i];
    if (!std::isfinite(x)) continue;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  if (lo > hi) return Limits{0.0, 0.0};  // no finite input
  if (diverging && !by_magnitude && lo < 0.0 && hi > 0.0) {
    const double m = std::max(-lo, hi);
    return Limits{-m, m};
  }
  return Limits{lo, hi};
}

void validate_limits(const Limits& limits, Transform t, double log_floor) {
  if (!std::isfinite(log_floor) || !(log_floor > 0.0))
    throw Error(ErrorKind::InvalidArgument, "display log floor must be finite and > 0, got " + num(log_floor));
  if (!std::isfinite(limits.lo) || !std::isfinite(limits.hi))
    throw Error(ErrorKind::InvalidArgument, "display limits must be finite, got lo " + num(limits.lo) +
                                                ", hi " + num(limits.hi));
  if (limits.lo > limits.hi)
    throw Error(ErrorKind::InvalidArgument, "display limits reversed: lo " + num(limits.lo) +
                                                " > hi " + num(limits.hi));
  if (apply_transform(limits.lo, t, log_floor) > apply_transform(limits.hi, t, log_floor))
    throw Error(ErrorKind::InvalidArgument, "display limits reversed under " + std::string(transform_name(t)) +
                                                ": t(lo " + num(limits.lo) + ") > t(hi " +
                                                num(limits.hi) + ")");
}

Normalizer::Normalizer(const Limits& limits, Transform t, double log_floor) : transform_(t), log_floor_(log_floor) {
  validate_limits(limits, t, log_floor);
  const double tlo = apply_transform(limits.lo, t, log_floor), thi = apply_transform(limits.hi, t, log_floor);
  collapsed_ = thi == tlo;
  if (!std::isfinite(thi - tlo)) scale_ = 0.5;
  tlo_ = tlo * scale_;
  range_ = thi * scale_ - tlo_;
}

double normalize(double x, const Limits& limits, Transform t, double log_floor) {
  return Normalizer(limits, t, log_floor)(x);
}

}  // namespace tmorph
