#include "stem/products/movie_plan.h"

#include <algorithm>
#include <cstdio>

#include "stem/calibration.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

std::string position_text(ScanPoint p) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "(%llu, %llu)", static_cast<unsigned long long>(p.row), static_cast<unsigned long long>(p.col));
  return buf;
}

std::string radius_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", r);
  return buf;
}

}  // namespace

std::vector<ScanPoint> scan_line_positions(ScanPoint a, ScanPoint b, uint64_t steps, std::array<uint64_t, 2> scan_shape) {
  for (const ScanPoint& p : {a, b})
    if (p.row >= scan_shape[0] || p.col >= scan_shape[1])
      throw Error(ErrorKind::InvalidArgument, "scan position " + position_text(p) + " is outside the scan of " + std::to_string(scan_shape[0]) +
                                                  " x " + std::to_string(scan_shape[1]) + " positions");
  const double dr = static_cast<double>(b.row) - static_cast<double>(a.row), dc = static_cast<double>(b.col) - static_cast<double>(a.col);
  const uint64_t n = steps != 0 ? steps : static_cast<uint64_t>(std::max(std::fabs(dr), std::fabs(dc))) + 1;
  std::vector<ScanPoint> out;
  out.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    const double t = n == 1 ? 0.0 : static_cast<double>(i) / static_cast<double>(n - 1);
    out.push_back({static_cast<uint64_t>(std::lround(static_cast<double>(a.row) + t * dr)),
                   static_cast<uint64_t>(std::lround(static_cast<double>(a.col) + t * dc))});
  }
  return out;
}

std::vector<double> sweep_values(double from, double to, uint64_t steps, const std::string& what) {
  if (steps < 1) throw Error(ErrorKind::InvalidArgument, "--steps must be at least 1");
  for (double v : {from, to})
    if (!std::isfinite(v) || v < 0)
      throw Error(ErrorKind::InvalidArgument, what + " " + radius_text(v) + ": a radius is a finite number >= 0 (pixels)");
  std::vector<double> out(steps);
  for (uint64_t i = 0; i < steps; ++i)
    out[i] = steps == 1 ? from : from + (to - from) * static_cast<double>(i) / static_cast<double>(steps - 1);
  return out;
}

MoviePlan plan_movie(const Acquisition& acq, const MovieRequest& r) {
  MoviePlan plan;
  const LoadPlan whole = plan_load(acq, r.base.load);
  if (r.mode == MovieMode::patterns_along) {
    plan.mode = "patterns along";
    if (r.base.load.scan_region || r.base.load.scan_bin != std::array<uint64_t, 2>{1, 1})
      throw Error(ErrorKind::InvalidArgument, "patterns along a line take positions of the whole scan: no --scan-region or --scan-bin");
    for (const ScanPoint& p : scan_line_positions(r.from_position, r.to_position, r.steps, whole.scan_shape)) {
      MovieFrameSpec f{r.base, "scan " + position_text(p)};
      f.spec.kind = ProductKind::mean_dp;
      f.spec.max_pattern = false;
      f.spec.load.scan_region = Box{p.row, p.row + 1, p.col, p.col + 1};
      plan.frames.push_back(std::move(f));
    }
    // THE rule (calibration.h) without a disk pass: the override, the file's, or α / a given disk radius.
    const Sourced mrad = detector_angle_per_pixel(acq, r.base.load, r.base.angle_per_pixel,
                                                  convergence_semiangle_mrad(acq, r.base.semiangle_mrad), r.base.disk.radius.value_or(NAN));
    if (mrad.known() && std::isfinite(mrad.value) && mrad.value > 0) plan.units_per_pixel = mrad.value, plan.unit = "mrad";
    return plan;
  }
  const bool inner = r.mode == MovieMode::sweep_inner;
  plan.mode = inner ? "sweep inner" : "sweep outer";
  const std::optional<double> fixed = inner ? r.outer_px : r.inner_px;
  if (!inner && !fixed) throw Error(ErrorKind::InvalidArgument, "--sweep outer needs --inner (pixels): the fixed inner radius");
  if (fixed && (!std::isfinite(*fixed) || *fixed < 0))
    throw Error(ErrorKind::InvalidArgument, std::string(inner ? "--outer " : "--inner ") + radius_text(*fixed) +
                                                ": a radius is a finite number >= 0 (pixels)");
  for (double v : sweep_values(r.from, r.to, r.steps, inner ? "--sweep inner" : "--sweep outer")) {
    const double in = inner ? v : *fixed;
    const std::optional<double> out = inner ? fixed : std::optional<double>(v);
    if (out && in > *out)
      throw Error(ErrorKind::InvalidArgument, "the annulus inner " + radius_text(in) + " px > outer " + radius_text(*out) +
                                                  " px: sweep within the fixed radius");
    MovieFrameSpec f{r.base, "inner " + radius_text(in) + " px" + (out ? ", outer " + radius_text(*out) + " px" : "")};
    f.spec.kind = ProductKind::mask;
    f.spec.detector = DetectorRequest{ProductKind::mask, "", std::nullopt, std::nullopt, in, out, std::nullopt};
    plan.frames.push_back(std::move(f));
  }
  const Sourced step = scan_step_A(acq, r.base.load, {});
  if (step.known() && std::isfinite(step.value) && step.value > 0) {
    const bool nm = step.value * static_cast<double>(whole.output_shape[1]) / 3 >= 10;
    plan.units_per_pixel = nm ? step.value / 10 : step.value;
    plan.unit = nm ? "nm" : "A";
  }
  return plan;
}

}  // namespace tmorph
