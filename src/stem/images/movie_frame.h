// One frame of a movie of product images (stem movie): the product's image exactly as its PNG render
// (product_image.h), then below it a caption strip with the frame's label and a scale bar.
//
// Layout: rows [0, H) are the render's opaque pixels as they are; its transparent pixels (the colour bar's
// gap, invalid cells) become the paper colour. Rows [H, H + kCaptionHeight) are paper, with the label in
// ink (bitmap_font.h) from (2, H + 3) and, when the scale is known, an ink bar 3 pixels thick from (2, H + 14)
// whose length is a round number (1, 2 or 5 x 10^k) of units at most a third of the cells' width, followed by
// that length and unit in text. Paper and ink are the colour map's darkest and lightest entries (by
// 299 R + 587 G + 114 B), so a frame holds only the map's colours: at most 256, exact in a GIF.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>

#include "render/cell_image.h"

namespace tmorph {

constexpr uint32_t kCaptionHeight = 22;

struct ScaleBar {
  double units_per_cell = NAN;  // physical size of one product value (one cell); NaN: no bar
  std::string unit;             // "mrad", "nm", "px", …
};

// The map's darkest and lightest entries (RGBA, opaque).
std::array<std::array<uint8_t, 4>, 2> paper_and_ink(const Colormap& map);

RgbaImage movie_frame(const CellImage& render, uint64_t cell_cols, const std::string& label, const ScaleBar& bar);

// The bar's length in units (1, 2 or 5 x 10^k) for a bar at most max_cells cells long; 0 when none fits.
double scale_bar_length(double units_per_cell, double max_cells);

}  // namespace tmorph
