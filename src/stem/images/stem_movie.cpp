#include "stem/images/stem_movie.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <variant>

#include "display/display_kernels.h"
#include "stem/images/movie_frame.h"
#include "stem/products/detector_sweep.h"
#include "tensormorph/error.h"

namespace tmorph {

MovieResult write_stem_movie(const Acquisition& acq, const MoviePlan& plan, const ProductDisplay& display, const MovieTarget& out,
                             double fps, bool shared_limits, const std::function<const Planner&()>& planner,
                             const std::string& encoder_dir) {
  const auto t0 = std::chrono::steady_clock::now();
  if (plan.frames.empty()) throw Error(ErrorKind::InvalidArgument, out.name + ": a movie needs at least one frame");
  if (!(fps > 0) || !std::isfinite(fps)) throw Error(ErrorKind::InvalidArgument, "--fps must be a positive number");
  MovieResult result;
  std::unique_ptr<MovieWriter> writer;
  nlohmann::json labels = nlohmann::json::array(), limits = nlohmann::json::array();
  nlohmann::json shown;  // colour map and transform as resolved
  const ScaleBar bar{plan.units_per_pixel, plan.unit};
  // A detector sweep's images come from one pass over the frames (detector_sweep.h); patterns one by one.
  const bool sweep = std::all_of(plan.frames.begin(), plan.frames.end(), [](const MovieFrameSpec& f) { return f.spec.kind == ProductKind::mask; });
  std::optional<SweepImages> swept;
  if (sweep) {
    std::vector<DetectorRequest> detectors;
    for (const MovieFrameSpec& f : plan.frames) detectors.push_back(f.spec.detector);
    swept = compute_sweep_images(acq, plan.frames.front().spec, detectors, planner());
    std::move(swept->placements.begin(), swept->placements.end(), std::back_inserter(result.placements));
  }
  struct FrameValues {
    std::vector<uint64_t> shape;
    std::vector<double> values;
  };
  const auto frame_values = [&](size_t i) {
    FrameValues v;
    if (swept) {
      v.shape = {swept->scan_shape[0], swept->scan_shape[1]};
      v.values.assign(swept->images[i].begin(), swept->images[i].end());
      std::vector<uint64_t>().swap(swept->images[i]);  // taken: not needed again
    } else {
      ProductOutput product = compute_product(acq, plan.frames[i].spec, std::nullopt, planner);
      std::move(product.placements.begin(), product.placements.end(), std::back_inserter(result.placements));
      v.shape = std::move(product.shape);
      v.values = std::visit([](const auto& x) { return std::vector<double>(x.begin(), x.end()); }, product.values);
    }
    return v;
  };
  // Shared limits: every frame's values first, then the union of their automatic limits for the ends not given.
  ProductDisplay drawn = display;
  std::vector<FrameValues> held;
  if (shared_limits && !(display.lo && display.hi)) {
    double lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < plan.frames.size(); ++i) {
      held.push_back(frame_values(i));
      const std::vector<double>& v = held.back().values;
      const Limits l = resolve_params(v.data(), v.size(), product_display_request(v, display)).limits;
      lo = std::min(lo, l.lo), hi = std::max(hi, l.hi);
    }
    if (!drawn.lo) drawn.lo = lo;
    if (!drawn.hi) drawn.hi = hi;
  }
  for (size_t i = 0; i < plan.frames.size(); ++i) {
    const MovieFrameSpec& f = plan.frames[i];
    const FrameValues fv = held.empty() ? frame_values(i) : std::move(held[i]);
    const std::vector<uint64_t>& shape = fv.shape;
    const std::vector<double>& values = fv.values;
    const CellImage img = render_product_image(shape, values, drawn, planner());
    result.placements.push_back(img.placement);
    const RgbaImage frame = movie_frame(img, shape.back(), f.label, bar);
    if (!writer) {
      writer = open_movie_writer(out, frame.width, frame.height, fps, encoder_dir);
      result.report["width"] = frame.width;
      result.report["height"] = frame.height;
      shown = {{"colormap", img.params.colormap->name}, {"transform", transform_name(img.params.transform)}};
      const auto [paper, ink] = paper_and_ink(*img.params.colormap);
      result.report["caption"] = {{"paper", {paper[0], paper[1], paper[2]}}, {"ink", {ink[0], ink[1], ink[2]}}, {"height", kCaptionHeight}};
    }
    writer->add(frame);
    labels.push_back(f.label);
    limits.push_back({img.params.limits.lo, img.params.limits.hi});
  }
  nlohmann::json& r = result.report;
  r["file"] = out.name;
  r["mode"] = plan.mode;
  r["frames"] = plan.frames.size();
  r["fps"] = fps;
  r["shared_limits"] = shared_limits;
  r["passes"] = sweep ? 1 : plan.frames.size();  // passes over the acquisition's frames (a pattern reads one frame)
  writer->finish();
  r["format"] = std::string(movie_format_name(writer->format()));
  r["codec"] = writer->codec();
  for (const auto& [name, value] : writer->facts()) r[name] = value;
  if (out.in_memory()) result.bytes = writer->take_bytes();
  r["scale_bar"] = {{"units_per_pixel", plan.units_per_pixel}, {"unit", plan.unit}};
  r["labels"] = std::move(labels);
  shown["limits"] = std::move(limits);
  r["display"] = std::move(shown);
  r["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace tmorph
