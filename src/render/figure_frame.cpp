// The frame of a written figure: title and axes around a labelled cell image (figure_frame.h).
#include "render/figure_frame.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "image/bitmap_font.h"
#include "render/colour_bar_ticks.h"

namespace tmorph {

namespace {

constexpr uint8_t kFrameInk[4] = {34, 34, 34, 255};
constexpr uint8_t kFramePaper[4] = {255, 255, 255, 255};
constexpr uint32_t kFrameTick = 3, kFrameGap = 2;

// 1, 2 or 5 x 10^k: the smallest at least `raw`.
double frame_step(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= raw * (1 - 1e-12)) return m * p;
  return 10 * p;
}

std::string frame_number_label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::abs(v) < 1e-12 ? 0.0 : v);
  std::string s(buf);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

std::vector<FigureTick> index_ticks(uint64_t first, uint64_t count, uint32_t pixels) {
  std::vector<FigureTick> out;
  if (count == 0 || pixels == 0) return out;
  const double per = static_cast<double>(pixels) / static_cast<double>(count);  // pixels per element
  const double target = std::max(2.0, pixels / 60.0);
  const auto step = static_cast<uint64_t>(std::max(1.0, frame_step(std::max(1.0, static_cast<double>(count) / target))));
  for (uint64_t i = (first + step - 1) / step * step; i < first + count; i += step)
    out.push_back({static_cast<double>(i - first) * per, std::to_string(i)});
  return out;
}

std::vector<FigureTick> unit_ticks(double extent, uint32_t pixels) {
  std::vector<FigureTick> out;
  if (!(extent > 0) || !std::isfinite(extent) || pixels == 0) return out;
  const double step = frame_step(extent / std::max(2.0, pixels / 60.0));
  for (int64_t k = 0; k * step <= extent * (1 + 1e-9); ++k) out.push_back({k * step / extent * pixels, frame_number_label(k * step)});
  return out;
}

FramedFigure frame_figure(const RgbaImage& labelled, uint32_t cells_w, uint32_t cells_h, const FigureFrameSpec& spec) {
  uint32_t label_w = text_width(spec.y.label);
  for (const auto& t : spec.y.ticks) label_w = std::max(label_w, text_width(t.label));
  const uint32_t line = kGlyphHeight + 4;
  const uint32_t left = kFrameGap + label_w + kFrameGap + kFrameTick;
  const uint32_t top = 3 + line + line;           // the title, then the y axis' label
  const uint32_t bottom = kFrameTick + kFrameGap + line + line;  // the x ticks' labels, then the x axis' label
  const uint32_t width = std::max({left + labelled.width + kFrameGap, left + text_width(spec.title) + kFrameGap, left + text_width(spec.x.label) + kFrameGap});
  FramedFigure f{RgbaImage(width, top + labelled.height + bottom), left, top};
  RgbaImage& out = f.image;
  for (uint32_t y = 0; y < out.height; ++y)
    for (uint32_t x = 0; x < out.width; ++x) std::copy_n(kFramePaper, 4, out.at(x, y));
  for (uint32_t y = 0; y < labelled.height; ++y) std::copy_n(labelled.at(0, y), size_t{labelled.width} * 4, out.at(left, top + y));
  draw_text(out, left, 3, spec.title, kFrameInk);
  draw_text(out, kFrameGap, 3 + line, spec.y.label, kFrameInk);
  // x ticks under the cells, labels centred on them (dropped when they would overlap or leave the image)
  int64_t last_end = -1;
  // Under the cells, or under the bar when it is taller (a short image): the labelled image keeps every pixel.
  const uint32_t ty = top + std::max(cells_h, labelled.height);
  for (const auto& t : spec.x.ticks) {
    const auto x = static_cast<uint32_t>(std::clamp<double>(std::floor(left + t.pixel), left, left + std::max<uint32_t>(1, cells_w) - 1));
    for (uint32_t k = 0; k < kFrameTick; ++k) std::copy_n(kFrameInk, 4, out.at(x, ty + k));
    const uint32_t w = text_width(t.label);
    const int64_t x0 = std::max<int64_t>(0, static_cast<int64_t>(x) - static_cast<int64_t>(w / 2));
    if (x0 <= last_end + 3 || x0 + w > static_cast<int64_t>(out.width)) continue;
    draw_text(out, static_cast<uint32_t>(x0), ty + kFrameTick + kFrameGap, t.label, kFrameInk);
    last_end = x0 + w;
  }
  const int64_t x_label = std::max<int64_t>(0, (static_cast<int64_t>(cells_w) - static_cast<int64_t>(text_width(spec.x.label))) / 2);
  draw_text(out, left + static_cast<uint32_t>(x_label), ty + kFrameTick + kFrameGap + line, spec.x.label, kFrameInk);
  // y ticks left of the cells, labels right-aligned against them
  int64_t last_bottom = -1;
  for (const auto& t : spec.y.ticks) {
    const auto y = static_cast<uint32_t>(std::clamp<double>(std::floor(top + t.pixel), top, top + std::max<uint32_t>(1, cells_h) - 1));
    for (uint32_t k = 1; k <= kFrameTick; ++k) std::copy_n(kFrameInk, 4, out.at(left - k, y));
    const int64_t y0 = std::max<int64_t>(0, static_cast<int64_t>(y) - kGlyphHeight / 2);
    if (y0 <= last_bottom + 1 || y0 + kGlyphHeight > static_cast<int64_t>(out.height)) continue;
    draw_text(out, left - kFrameTick - kFrameGap - text_width(t.label), static_cast<uint32_t>(y0), t.label, kFrameInk);
    last_bottom = y0 + kGlyphHeight;
  }
  return f;
}

PngText framed_layout_text(const PngText& layout, const FramedFigure& f, const FigureFrameSpec& spec) {
  PngText out;
  for (const auto& [key, value] : layout) {
    if (key.size() < 4 || key.compare(key.size() - 4, 4, "_box") != 0) {
      out.emplace_back(key, value);
      continue;
    }
    unsigned long long x = 0, y = 0, w = 0, h = 0;
    if (std::sscanf(value.c_str(), "%llu,%llu,%llu,%llu", &x, &y, &w, &h) != 4) {
      out.emplace_back(key, value);
      continue;
    }
    out.emplace_back(key, std::to_string(x + f.left) + "," + std::to_string(y + f.top) + "," + std::to_string(w) + "," + std::to_string(h));
  }
  const auto axis = [](const FigureAxis& a) {
    std::string s = a.label + ":";
    for (size_t k = 0; k < a.ticks.size(); ++k) s += (k ? ";" : " ") + a.ticks[k].label;
    return s;
  };
  out.emplace_back("tensormorph:figure_box", "0,0," + std::to_string(f.image.width) + "," + std::to_string(f.image.height));
  out.emplace_back("tensormorph:figure_title", spec.title);
  out.emplace_back("tensormorph:x_axis", axis(spec.x));
  out.emplace_back("tensormorph:y_axis", axis(spec.y));
  return out;
}

void write_framed_png(const std::string& path, const CellImage& img, PngText text, std::string_view bar_title, const FigureFrameSpec& spec) {
  const RgbaImage labelled = with_colour_bar_labels(img, bar_title);
  const FramedFigure f = frame_figure(labelled, img.cells_width, img.cells_height, spec);
  const PngText layout = framed_layout_text(colour_bar_layout_text(img, labelled), f, spec);
  text.insert(text.end(), layout.begin(), layout.end());
  write_png(path, f.image, text);
}

}  // namespace tmorph
