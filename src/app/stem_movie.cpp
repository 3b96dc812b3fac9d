#include "app/stem_movie.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <variant>

#include "render/gif_write.h"
#include "render/movie_frame.h"
#include "render/mp4_write.h"
#include "stem/detector_sweep.h"
#include "tensormorph/error.h"

namespace tmorph {

MovieFormat movie_format(const std::string& path) {
  const size_t dot = path.find_last_of('.');
  std::string ext = dot == std::string::npos || path.find('/', dot) != std::string::npos ? "" : path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == "gif") return MovieFormat::gif;
  if (ext == "mp4") return MovieFormat::mp4;
  throw Error(ErrorKind::InvalidArgument, path + ": a movie is written as .gif or .mp4 (the extension chooses)");
}

MovieResult write_stem_movie(const Acquisition& acq, const MoviePlan& plan, const ProductDisplay& display, const std::string& out,
                             double fps, const std::function<const Planner&()>& planner) {
  const auto t0 = std::chrono::steady_clock::now();
  const MovieFormat format = movie_format(out);
  if (plan.frames.empty()) throw Error(ErrorKind::InvalidArgument, out + ": a movie needs at least one frame");
  if (!(fps > 0) || !std::isfinite(fps)) throw Error(ErrorKind::InvalidArgument, "--fps must be a positive number");
  MovieResult result;
  std::unique_ptr<GifWriter> gif;
  std::unique_ptr<Mp4Writer> mp4;
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
  for (size_t i = 0; i < plan.frames.size(); ++i) {
    const MovieFrameSpec& f = plan.frames[i];
    std::vector<uint64_t> shape;
    std::vector<double> values;
    if (swept) {
      shape = {swept->scan_shape[0], swept->scan_shape[1]};
      values.assign(swept->images[i].begin(), swept->images[i].end());
      std::vector<uint64_t>().swap(swept->images[i]);  // drawn: not needed again
    } else {
      ProductOutput product = compute_product(acq, f.spec, std::nullopt, planner);
      std::move(product.placements.begin(), product.placements.end(), std::back_inserter(result.placements));
      shape = std::move(product.shape);
      values = std::visit([](const auto& v) { return std::vector<double>(v.begin(), v.end()); }, product.values);
    }
    const CellImage img = render_product_image(shape, values, display, planner());
    result.placements.push_back(img.placement);
    const RgbaImage frame = movie_frame(img, shape.back(), f.label, bar);
    if (!gif && !mp4) {
      if (format == MovieFormat::gif) gif = std::make_unique<GifWriter>(out, frame.width, frame.height, fps);
      else mp4 = std::make_unique<Mp4Writer>(out, frame.width, frame.height, fps);
      result.report["width"] = frame.width;
      result.report["height"] = frame.height;
      shown = {{"colormap", img.params.colormap->name}, {"transform", transform_name(img.params.transform)}};
      const auto [paper, ink] = paper_and_ink(*img.params.colormap);
      result.report["caption"] = {{"paper", {paper[0], paper[1], paper[2]}}, {"ink", {ink[0], ink[1], ink[2]}}, {"height", kCaptionHeight}};
    }
    if (gif) gif->add(frame);
    else mp4->add(frame);
    labels.push_back(f.label);
    limits.push_back({img.params.limits.lo, img.params.limits.hi});
  }
  nlohmann::json& r = result.report;
  r["file"] = out;
  r["mode"] = plan.mode;
  r["frames"] = plan.frames.size();
  r["fps"] = fps;
  r["passes"] = sweep ? 1 : plan.frames.size();  // passes over the acquisition's frames (a pattern reads one frame)
  if (gif) {
    gif->finish();
    r["format"] = "gif", r["codec"] = "gif";
    r["delay_cs"] = gif->delay_cs();
    r["inexact_frames"] = gif->inexact_frames();
    r["max_error"] = gif->max_error();
  } else {
    mp4->finish();
    r["format"] = "mp4", r["codec"] = "h264 (libx264, yuv420p)";
    r["coded_width"] = mp4->coded_width();
    r["coded_height"] = mp4->coded_height();
  }
  r["scale_bar"] = {{"units_per_pixel", plan.units_per_pixel}, {"unit", plan.unit}};
  r["labels"] = std::move(labels);
  shown["limits"] = std::move(limits);
  r["display"] = std::move(shown);
  r["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace tmorph
