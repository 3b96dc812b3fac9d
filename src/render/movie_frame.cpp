#include "render/movie_frame.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "render/bitmap_font.h"

namespace tmorph {

double scale_bar_length(double units_per_cell, double max_cells) {
  if (!(units_per_cell > 0) || !std::isfinite(units_per_cell) || !(max_cells >= 1)) return 0;
  const double max_units = units_per_cell * max_cells;
  double best = 0;
  for (int e = static_cast<int>(std::floor(std::log10(max_units))) - 1; e <= static_cast<int>(std::floor(std::log10(max_units))); ++e)
    for (double m : {1.0, 2.0, 5.0}) {
      const double len = m * std::pow(10.0, e);
      if (len <= max_units * (1 + 1e-12) && len >= units_per_cell) best = std::max(best, len);
    }
  return best;
}

RgbaImage movie_frame(const CellImage& render, uint64_t cell_cols, const std::string& label, const ScaleBar& bar) {
  const RgbaImage& src = render.image;
  RgbaImage frame(src.width, src.height + kCaptionHeight);
  std::memcpy(frame.pixels.data(), src.pixels.data(), src.pixels.size());
  for (size_t i = 3; i < frame.pixels.size(); i += 4) frame.pixels[i] = 255;  // opaque; the caption strip black
  static const uint8_t kWhite[4] = {255, 255, 255, 255};
  const uint32_t top = src.height;
  draw_text(frame, 2, top + 3, label, kWhite);
  const double len = scale_bar_length(bar.units_per_cell, static_cast<double>(cell_cols) / 3);
  if (len > 0) {
    const uint32_t px = static_cast<uint32_t>(std::lround(len / bar.units_per_cell * render.scale_x));
    for (uint32_t y = top + 14; y < top + 17; ++y)
      for (uint32_t x = 2; x < 2 + px && x < frame.width; ++x) std::copy(kWhite, kWhite + 4, frame.at(x, y));
    char text[64];
    std::snprintf(text, sizeof text, "%g %s", len, bar.unit.c_str());
    draw_text(frame, 2 + px + 4, top + 12, text, kWhite);
  }
  return frame;
}

}  // namespace tmorph
