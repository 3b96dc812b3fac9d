#include "stem/images/movie_frame.h"

#include <algorithm>
#include <cstdio>

#include "image/bitmap_font.h"

namespace tmorph {

double scale_bar_length(double units_per_cell, double max_cells) {
  if (!(units_per_cell > 0) || !std::isfinite(units_per_cell) || !(max_cells >= 1)) return 0;
  const double max_units = units_per_cell * max_cells;
  const int top = static_cast<int>(std::floor(std::log10(max_units)));
  double best = 0;
  for (int e = top - 1; e <= top; ++e)
    for (double m : {1.0, 2.0, 5.0}) {
      const double len = m * std::pow(10.0, e);
      if (len <= max_units * (1 + 1e-12) && len >= units_per_cell) best = std::max(best, len);
    }
  return best;
}

std::array<std::array<uint8_t, 4>, 2> paper_and_ink(const Colormap& map) {
  auto luma = [&](int k) { return 299 * map.rgba[k][0] + 587 * map.rgba[k][1] + 114 * map.rgba[k][2]; };
  int dark = 0, light = 0;
  for (int k = 1; k < 256; ++k) {
    if (luma(k) < luma(dark)) dark = k;
    if (luma(k) > luma(light)) light = k;
  }
  return {{{map.rgba[dark][0], map.rgba[dark][1], map.rgba[dark][2], 255},
           {map.rgba[light][0], map.rgba[light][1], map.rgba[light][2], 255}}};
}

RgbaImage movie_frame(const CellImage& render, uint64_t cell_cols, const std::string& label, const ScaleBar& bar) {
  const RgbaImage& src = render.image;
  const auto [paper, ink] = paper_and_ink(*render.params.colormap);
  RgbaImage frame(src.width, src.height + kCaptionHeight);
  for (size_t i = 0; i < frame.pixels.size(); i += 4) {
    const bool opaque = i < src.pixels.size() && src.pixels[i + 3] == 255;
    std::copy_n(opaque ? src.pixels.data() + i : paper.data(), 4, frame.pixels.data() + i);
  }
  const uint32_t top = src.height;
  draw_text(frame, 2, top + 3, label, ink.data());
  const double len = scale_bar_length(bar.units_per_cell, static_cast<double>(cell_cols) / 3);
  if (len > 0) {
    const uint32_t px = static_cast<uint32_t>(std::lround(len / bar.units_per_cell * render.scale_x));
    for (uint32_t y = top + 14; y < top + 17; ++y)
      for (uint32_t x = 2; x < 2 + px && x < frame.width; ++x) std::copy_n(ink.data(), 4, frame.at(x, y));
    char text[64];
    std::snprintf(text, sizeof text, "%g %s", len, bar.unit.c_str());
    draw_text(frame, 2 + px + 4, top + 12, text, ink.data());
  }
  return frame;
}

}  // namespace tmorph
