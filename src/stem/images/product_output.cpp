#include "stem/images/product_output.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include "core/npy.h"
#include "image/bitmap_font.h"
#include "image/tiff_writer.h"
#include "render/cell_image.h"
#include "render/colour_bar_ticks.h"
#include "render/figure_frame.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

// A [2, R, C] field's picture (its u rows above its v rows): "U" and "V" in dark ink in the transparent gap between
// the cells and the colour bar, each at the middle of its half, and a mark at the row where v begins.
void label_field_components(CellImage& img) {
  static constexpr uint8_t kComponentInk[4] = {20, 20, 20, 255};
  const uint32_t x = img.cells_width + (kColourBarGap - kGlyphWidth) / 2, half = img.cells_height / 2;
  if (half < kGlyphHeight + 2) return;  // too short to label without covering the mark
  draw_text(img.image, x, (half - kGlyphHeight) / 2, "U", kComponentInk);
  draw_text(img.image, x, half + (half - kGlyphHeight) / 2, "V", kComponentInk);
  for (uint32_t dx = 0; dx < kColourBarGap - 2; ++dx) std::copy_n(kComponentInk, 4, img.image.at(img.cells_width + 1 + dx, half));
}

// The frame's axes for a product drawn in a cells_w x cells_h block (a field's two components stacked).
FigureFrameSpec product_frame(const ProductFigure& figure, const std::vector<uint64_t>& shape, uint32_t cells_w, uint32_t cells_h) {
  const bool field = shape.size() == 3;
  const uint64_t rows = shape[field ? 1 : 0], cols = shape.back();
  const uint32_t part_h = field ? cells_h / 2 : cells_h;
  FigureFrameSpec f;
  f.title = figure.title;
  const bool nm = figure.grid == ProductFigure::Grid::scan && figure.scan_step && figure.scan_step->known() && figure.scan_step->value > 0;
  const double nm_per_step = nm ? figure.scan_step->value / 10 : 0;  // Å to nm
  if (nm) {
    f.x = {"SCAN X (NM)", unit_ticks(static_cast<double>(cols) * nm_per_step, cells_w)};
    f.y = {"SCAN Y (NM)", unit_ticks(static_cast<double>(rows) * nm_per_step, part_h)};
  } else {
    const char* what = figure.grid == ProductFigure::Grid::scan ? "SCAN " : figure.grid == ProductFigure::Grid::detector ? "DETECTOR " : "";
    const char* unit = figure.grid == ProductFigure::Grid::detector ? " (PX)" : "";
    f.x = {std::string(what) + "COLUMN" + unit, index_ticks(0, cols, cells_w)};
    f.y = {std::string(what) + "ROW" + unit, index_ticks(0, rows, part_h)};
  }
  if (field) {  // the v component's rows, ticked again below the u component's
    const size_t n = f.y.ticks.size();
    for (size_t k = 0; k < n; ++k) f.y.ticks.push_back({f.y.ticks[k].pixel + part_h, f.y.ticks[k].label});
  }
  return f;
}

}  // namespace

ProductPng write_product_png(const std::string& path, const std::string& product, const std::vector<uint64_t>& shape,
                             const std::vector<double>& v, const ProductDisplay& display, const Planner& planner,
                             const ProductFigure& figure) {
  CellImage img = render_product_image(shape, v, display, planner);
  PngText text = cell_image_text(img, CellStat::Mean, {{"tensormorph:product", product}, {"tensormorph:shape", nlohmann::json(shape).dump()}});
  if (shape.size() == 3 && shape[0] == 2) {
    label_field_components(img);
    text.emplace_back("tensormorph:components", "u: top half of the cells, v: bottom half");
  }
  const std::string bar = figure.units.empty() ? product : figure.units;  // the bar's title: its units, and the transform
  write_framed_png(path, img, text,
                   img.params.transform == Transform::Linear ? bar : bar + " " + std::string(transform_name(img.params.transform)),
                   product_frame(figure, shape, img.cells_width, img.cells_height));
  return {{{"colormap", img.params.colormap->name}, {"transform", transform_name(img.params.transform)},
           {"limits", {img.params.limits.lo, img.params.limits.hi}}, {"histogram", img.histogram.counts}},
          img.placement};
}

void write_product_npy(const std::string& path, const std::string& descr, const std::vector<uint64_t>& shape,
                       const void* data, uint64_t bytes) {
  const std::string preamble = npy_preamble(descr, shape);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::Io, path + ": cannot create");
  out.write(preamble.data(), static_cast<std::streamsize>(preamble.size()));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out) throw Error(ErrorKind::Io, path + ": write failed");
}

nlohmann::json write_product_tiff(const std::string& path, const std::string& product, const std::string& descr,
                                  const std::vector<uint64_t>& shape, const void* data, const Sourced* scan_step) {
  const bool field = shape.size() == 3;
  if ((shape.size() != 2 && !field) || (field && shape[0] != 2))
    throw Error(ErrorKind::Internal, path + ": a TIFF product must be [R, C] or a [2, R, C] field, have " + nlohmann::json(shape).dump());
  TiffRaster r;
  r.pages = field ? 2 : 1;
  r.rows = static_cast<uint32_t>(shape[field ? 1 : 0]);
  r.cols = static_cast<uint32_t>(shape[field ? 2 : 1]);
  const uint64_t n = uint64_t{r.pages} * r.rows * r.cols;
  nlohmann::json report = {{"pages", r.pages}};
  std::vector<float> rounded;
  if (descr == "<f8") {
    const auto* v = static_cast<const double*>(data);
    rounded.assign(v, v + n);  // nearest float32 of each value
    r.sample = TiffRaster::Sample::ieee_float;
    r.bits = 32;
    r.data = rounded.data();
    report["samples"] = "float32";
    report["rounded_from"] = "float64";
  } else if (descr == "<u8" || descr == "<u4") {
    r.bits = descr == "<u8" ? 64 : 32;
    r.data = data;
    report["samples"] = descr == "<u8" ? "uint64" : "uint32";
  } else {
    throw Error(ErrorKind::Internal, path + ": no TIFF samples for a product of descr " + descr);
  }
  const bool calibrated = scan_step && scan_step->known() && std::isfinite(scan_step->value) && scan_step->value > 0;
  TiffTags tags;
  if (calibrated) tags.pixels_per_cm = 1e8 / scan_step->value;
  report["pixels_per_cm"] = tags.pixels_per_cm ? nlohmann::json(*tags.pixels_per_cm) : nlohmann::json(nullptr);
  report["scan_step"] = calibrated ? to_json(*scan_step) : nlohmann::json(nullptr);
  tags.description = nlohmann::json{{"product", product}, {"shape", shape}, {"samples", report["samples"]},
                                    {"scan_step", report["scan_step"]}}.dump();
  write_tiff(path, r, tags);
  return report;
}

}  // namespace tmorph
