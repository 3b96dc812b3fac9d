#include "render/colour_bar_ticks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "image/bitmap_font.h"

namespace tmorph {

namespace {

constexpr uint32_t kMark = 3, kPad = 2;                       // tick mark length, padding (pixels)
constexpr uint8_t kInk[4] = {34, 34, 34, 255};                 // labels and marks
constexpr uint8_t kPaper[4] = {255, 255, 255, 255};            // the label panel

// An integer below 10^7 in full, any other value as %.3g with an upper-case exponent; no negative zero (what the
// 5 x 7 font draws).
std::string label_of(double v) {
  if (v == 0) v = 0;  // -0 prints as 0
  char b[32];
  if (std::fabs(v) < 1e7 && v == std::nearbyint(v)) std::snprintf(b, sizeof b, "%.0f", v);
  else std::snprintf(b, sizeof b, "%.3g", v);
  std::string s = b;
  for (char& c : s)
    if (c == 'e') c = 'E';
  return s;
}

// The 1, 2 or 5 x 10^k nearest to `raw` (> 0) by ratio.
double nice_step(double raw) {
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double best = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (std::fabs(std::log(m * mag / raw)) < std::fabs(std::log(best / raw))) best = m * mag;
  return best;
}

// Multiples of a nice step inside [lo, hi], about `want` of them.
std::vector<double> nice_values(double lo, double hi, unsigned want) {
  std::vector<double> out;
  if (!(hi > lo)) return out;
  const double step = nice_step((hi - lo) / std::max(1u, want - 1));
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k += 1) out.push_back(k * step);
  return out;
}

}  // namespace

std::vector<ColourBarTick> colour_bar_ticks(const DisplayParams& p, unsigned max_ticks) {
  const Normalizer normalize(p.limits, p.transform, p.log_floor);
  const double lo = p.limits.lo, hi = p.limits.hi;
  std::vector<double> candidates;
  if (normalize.collapsed()) {
    candidates.push_back(p.transform == Transform::Log ? std::fmax(std::fabs(lo), p.log_floor) : lo);
  } else if (p.transform == Transform::Linear) {
    candidates = nice_values(lo, hi, 5);
  } else if (p.transform == Transform::Log) {
    const double tlo = apply_transform(lo, Transform::Log, p.log_floor), thi = apply_transform(hi, Transform::Log, p.log_floor);
    std::vector<double> exps;
    for (double e = std::ceil(tlo - 1e-9); e <= thi + 1e-9; e += 1) exps.push_back(e);
    if (exps.size() < 2) exps = nice_values(tlo, thi, 5);
    for (double e : exps) candidates.push_back(std::pow(10.0, e));
  } else {  // signed-log: evenly spaced in t, labels back in data units
    const double tlo = apply_transform(lo, p.transform), thi = apply_transform(hi, p.transform);
    for (int k = 0; k <= 4; ++k) {
      const double t = tlo + (thi - tlo) * k / 4;
      candidates.push_back(std::copysign(std::expm1(std::fabs(t)), t));
    }
  }
  std::vector<ColourBarTick> ticks;
  for (double v : candidates) {
    ColourBarTick t;
    t.label = label_of(v);
    t.value = std::strtod(t.label.c_str(), nullptr);  // the printed value, placed where its colour is
    if (p.transform == Transform::Log && std::fabs(t.value) < p.log_floor) continue;
    t.position = normalize(t.value);
    if (!normalize.collapsed() && (t.value < std::min(lo, hi) - std::fabs(hi - lo) * 1e-9 || t.value > std::max(lo, hi) + std::fabs(hi - lo) * 1e-9) &&
        p.transform != Transform::Log)
      continue;  // rounding to 3 digits moved it outside the bar
    if (std::isnan(t.position)) continue;
    ticks.push_back(std::move(t));
  }
  // At most max_ticks, spread over the list.
  if (ticks.size() > max_ticks && max_ticks > 0) {
    std::vector<ColourBarTick> kept;
    const size_t every = (ticks.size() + max_ticks - 1) / max_ticks;
    for (size_t i = 0; i < ticks.size(); i += every) kept.push_back(ticks[i]);
    ticks = std::move(kept);
  }
  return ticks;
}

namespace {

// The bar's pixel row drawn in the colour of position n (cell_image.cpp: row y shows colour index
// 255 - floor(y * 256 / h); n has index min(255, floor(n * 256))): the middle of that index's rows.
int64_t row_of(double n, uint32_t h) {
  const double k = std::min(255.0, std::floor(n * 256));
  return std::clamp<int64_t>(std::lround((255 - k + 0.5) * h / 256.0 - 0.5), 0, static_cast<int64_t>(h) - 1);
}

// The ticks drawn on a bar `h` pixels tall, top first: those whose labels do not overlap the one kept before.
std::vector<ColourBarTick> drawn_ticks(const DisplayParams& params, uint32_t h) {
  std::vector<ColourBarTick> ticks = colour_bar_ticks(params);
  std::sort(ticks.begin(), ticks.end(), [](const auto& a, const auto& b) { return a.position > b.position; });
  std::vector<ColourBarTick> shown;
  for (auto& t : ticks)
    if (shown.empty() || row_of(t.position, h) - row_of(shown.back().position, h) >= static_cast<int64_t>(kGlyphHeight + 2))
      shown.push_back(std::move(t));
  return shown;
}

}  // namespace

RgbaImage with_colour_bar_labels(const CellImage& img, std::string_view title) {
  const RgbaImage& in = img.image;
  const uint32_t h = in.height;
  const std::vector<ColourBarTick> shown = drawn_ticks(img.params, h);
  const auto row = [&](double n) { return row_of(n, h); };
  uint32_t text_w = title.empty() ? 0 : text_width(title);
  for (const auto& t : shown) text_w = std::max(text_w, text_width(t.label));
  const uint32_t panel = kMark + kPad + text_w + kPad;
  RgbaImage out(in.width + panel, h);
  for (uint32_t y = 0; y < h; ++y) {
    std::copy_n(in.at(0, y), size_t{in.width} * 4, out.at(0, y));
    for (uint32_t x = in.width; x < out.width; ++x) std::copy_n(kPaper, 4, out.at(x, y));
  }
  const uint32_t x0 = in.width;
  for (const auto& t : shown) {
    const uint32_t y = static_cast<uint32_t>(std::clamp<int64_t>(row(t.position), 0, h - 1));
    for (uint32_t x = x0; x < x0 + kMark; ++x) std::copy_n(kInk, 4, out.at(x, y));
    const int64_t top = std::clamp<int64_t>(static_cast<int64_t>(y) - kGlyphHeight / 2, 0, static_cast<int64_t>(h) - kGlyphHeight);
    draw_text(out, x0 + kMark + kPad, static_cast<uint32_t>(std::max<int64_t>(0, top)), t.label, kInk);
  }
  // The title above the top label when there is room for it.
  if (!title.empty() && (shown.empty() || row(shown.front().position) >= static_cast<int64_t>(2 * kGlyphHeight + 4)))
    draw_text(out, x0 + kMark + kPad, 0, title, kInk);
  return out;
}

PngText colour_bar_layout_text(const CellImage& img, const RgbaImage& labelled) {
  const auto box = [](uint32_t x, uint32_t y, uint32_t w, uint32_t h) {
    return std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(w) + "," + std::to_string(h);
  };
  const uint32_t bar_x = img.cells_width + kColourBarGap;
  std::string ticks;
  for (const auto& t : drawn_ticks(img.params, img.image.height)) ticks += (ticks.empty() ? "" : ";") + t.label;
  return {{"tensormorph:cells_box", box(0, 0, img.cells_width, img.cells_height)},
          {"tensormorph:colour_bar_box", box(bar_x, 0, kColourBarWidth, img.image.height)},
          {"tensormorph:labels_box", box(img.image.width, 0, labelled.width - img.image.width, labelled.height)},
          {"tensormorph:ticks", ticks}};
}

void write_labelled_png(const std::string& path, const CellImage& img, PngText text, std::string_view title) {
  const RgbaImage labelled = with_colour_bar_labels(img, title);
  const PngText layout = colour_bar_layout_text(img, labelled);
  text.insert(text.end(), layout.begin(), layout.end());
  write_png(path, labelled, text);
}

}  // namespace tmorph
