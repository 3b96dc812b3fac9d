#include "stem/products/detector_geometry.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "core/json_number.h"
#include "stem/products/products.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

nlohmann::json to_json(const ResolvedDisk& d) {
  nlohmann::json j = {{"row", d.disk.row}, {"col", d.disk.col}, {"radius", d.disk.radius}, {"source", d.source}};
  if (d.detected) j["area"] = d.disk.area, j["threshold"] = d.disk.threshold;
  return j;
}

DiskRequest binned(const DiskRequest& request, uint64_t factor) {
  const double f = static_cast<double>(factor);
  DiskRequest out;
  if (request.center) out.center = std::array<double, 2>{((*request.center)[0] + 0.5) / f - 0.5, ((*request.center)[1] + 0.5) / f - 0.5};
  if (request.radius) out.radius = *request.radius / f;
  out.radius_name = request.radius_name;
  return out;
}

ResolvedDisk resolve_bright_field_disk(const DiskRequest& request, const std::function<std::vector<double>()>& mean_pattern,
                                       uint64_t rows, uint64_t cols) {
  if (request.radius && !(*request.radius > 0 && std::isfinite(*request.radius)))
    throw Error(ErrorKind::InvalidArgument, request.radius_name + " " + number(*request.radius) +
                                                ": the bright-field disk radius must be > 0 pixels");
  if (request.center && !(std::isfinite((*request.center)[0]) && std::isfinite((*request.center)[1])))
    throw Error(ErrorKind::InvalidArgument, "bright-field disk centre: row and column must be finite numbers of pixels");
  ResolvedDisk r;
  if (request.center && request.radius) {
    r.disk.row = (*request.center)[0], r.disk.col = (*request.center)[1], r.disk.radius = *request.radius;
    r.source = "given";
    return r;
  }
  r.disk = detect_bright_field_disk(mean_pattern(), rows, cols);
  r.detected = true;
  if (request.center) r.disk.row = (*request.center)[0], r.disk.col = (*request.center)[1];
  if (request.radius) r.disk.radius = *request.radius;
  r.source = request.center || request.radius ? "detected, partly given" : "detected";
  return r;
}

ResolvedDisk resolve_bright_field_disk(const Acquisition& acq, const LoadRequest& load, const DiskRequest& request,
                                       const Planner& planner, std::vector<Placement>* placements) {
  const LoadPlan plan = plan_load(acq, load);
  return resolve_bright_field_disk(
      request,
      [&] {
        ProductRequest pattern;
        pattern.load = load;
        pattern.frame_sums = false, pattern.pattern = true;
        const ProductResult r = compute_products(acq, pattern, planner);
        placements->insert(placements->end(), r.placements.begin(), r.placements.end());
        return mean_pattern(r);
      },
      plan.output_shape[2], plan.output_shape[3]);
}

DetectorGeometry resolve_detector_geometry(const Acquisition& acq, const LoadRequest& load, const DiskRequest& disk,
                                           const Override& semiangle_mrad, const Override& mrad_per_px, const Planner& planner,
                                           std::vector<Placement>* placements) {
  return detector_geometry_around(acq, load, resolve_bright_field_disk(acq, load, disk, planner, placements), semiangle_mrad, mrad_per_px);
}

DetectorGeometry detector_geometry_around(const Acquisition& acq, const LoadRequest& load, const ResolvedDisk& disk,
                                          const Override& semiangle_mrad, const Override& mrad_per_px) {
  DetectorGeometry g;
  g.disk = disk;
  g.semiangle_mrad = convergence_semiangle_mrad(acq, semiangle_mrad);
  g.angle_per_pixel = detector_angle_per_pixel(acq, load, mrad_per_px, g.semiangle_mrad, g.disk.disk.radius);
  return g;
}

ResolvedDetector resolve_virtual_detector(const DetectorRequest& request, const BrightFieldDisk& disk,
                                          const std::array<uint64_t, 2>& frame, const Sourced& angle_per_pixel) {
  ResolvedDetector d;
  d.angle_per_pixel = angle_per_pixel;
  if (request.rect) {
    if (request.kind != ProductKind::mask)
      throw Error(ErrorKind::InvalidArgument, std::string("virtual detector: a rectangle is a mask's detector, not ") + product_name(request.kind) + "'s");
    if (!request.mask_file.empty() || request.inner_px || request.outer_px || request.inner_mrad || request.outer_mrad)
      throw Error(ErrorKind::InvalidArgument, "virtual detector: give a rectangle or inner/outer radii or a mask file, not both "
                                              "(--rect excludes --inner, --outer, --inner-mrad, --outer-mrad and --mask)");
    d.kind = "rectangle", d.rect = *request.rect;
    d.pixels = rectangle_pixels(frame[0], frame[1], d.rect);
    return d;
  }
  if (request.kind == ProductKind::mask && !request.mask_file.empty()) {
    d.kind = "user mask", d.mask_file = request.mask_file;
    d.pixels = mask_pixels_from_file(request.mask_file, frame[0], frame[1]);
    return d;
  }
  constexpr double inf = std::numeric_limits<double>::infinity();
  d.kind = "annulus", d.given_in = "pixels";
  // Given radii win over a product's preset (stem adf --inner-mrad 40 --outer-mrad 150 is that annulus);
  // mrad before pixels; a preset only when none is given; mask needs one of them.
  if (request.kind != ProductKind::mask && !preset_radii(request.kind, disk.radius)) {
    throw Error(ErrorKind::InvalidArgument, std::string("virtual detector: ") + product_name(request.kind) + " is not a virtual image");
  } else if (request.inner_mrad || request.outer_mrad) {
    const double per_px = require_positive(angle_per_pixel, "detector angle per pixel").value;
    d.inner_px = std::max(0.0, request.inner_mrad.value_or(0)) / per_px;
    d.outer_px = request.outer_mrad ? *request.outer_mrad / per_px : inf;
    d.given_in = "mrad";
  } else if (request.inner_px || request.outer_px) {
    d.inner_px = std::max(0.0, request.inner_px.value_or(0));
    d.outer_px = request.outer_px.value_or(inf);
    if (request.outer_px && (*request.outer_px <= 0 || *request.outer_px < d.inner_px))
      throw Error(ErrorKind::InvalidArgument, "virtual detector: the outer radius must be > 0 and >= the inner radius "
                                              "(--outer must be > 0 and >= --inner)");
  } else if (auto preset = preset_radii(request.kind, disk.radius)) {
    d.inner_px = preset->first, d.outer_px = preset->second;
  } else {
    throw Error(ErrorKind::InvalidArgument, "virtual detector: mask needs a detector: inner/outer radii in pixels or mrad, or a mask file");
  }
  d.pixels = annulus_pixels(frame[0], frame[1], disk.row, disk.col, d.inner_px, d.outer_px);
  return d;
}

nlohmann::json annulus_json(double inner_px, double outer_px, const std::string& given_in, uint64_t pixels,
                            const Sourced& angle_per_pixel) {
  nlohmann::json j = {{"kind", "annulus"}, {"inner_px", inner_px}, {"outer_px", json_number(outer_px)}, {"given_in", given_in},
                      {"pixels", pixels}};
  if (angle_per_pixel.known()) {
    j["inner_mrad"] = inner_px * angle_per_pixel.value;
    j["outer_mrad"] = json_number(outer_px * angle_per_pixel.value);
    j["angle_per_pixel"] = to_json(angle_per_pixel);
  }
  return j;
}

nlohmann::json to_json(const ResolvedDetector& d) {
  if (d.kind == "user mask") return {{"kind", d.kind}, {"file", d.mask_file}, {"pixels", d.pixels.size()}};
  if (d.kind == "rectangle")
    return {{"kind", d.kind}, {"rect", {d.rect.r0, d.rect.c0, d.rect.r1, d.rect.c1}}, {"rows", {d.rect.r0, d.rect.r1}},
            {"cols", {d.rect.c0, d.rect.c1}}, {"pixels", d.pixels.size()}};
  return annulus_json(d.inner_px, d.outer_px, d.given_in, d.pixels.size(), d.angle_per_pixel);
}

}  // namespace tmorph
