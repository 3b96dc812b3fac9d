// Tick marks and value labels for a cell image's colour bar (cell_image.h's layout): the figure a person reads,
// written by the CLI's PNG outputs (`render -o OUT.png`, `stem <product> -o OUT.png`). The server's tiles stay as
// cell_image.h draws them (the viewer draws its own legend, and reads cells by that layout).
//
// Contract:
// - Ticks are values in DATA units at "nice" numbers: under linear, multiples of 1, 2 or 5 x 10^k inside the
//   limits; under log, the powers of ten inside them (nice steps of the exponent when fewer than two are), never
//   below the log floor; under signed-log, evenly spaced steps of t(x). Labels: an integer below 10^7 in full,
//   any other value to 3 significant digits (%.3g, upper-case exponent: what the 5 x 7 font draws). Each
//   tick's position is the display kernels' own normalisation of its label's value (transform.h: n in [0, 1],
//   1 at the top of the bar), so a tick sits exactly where its printed value's colour is.
// - A collapsed range (t(lo) == t(hi)) has one tick, in the middle. Ticks closer than a label's height to the
//   one kept before are dropped, so labels never overlap; at most `max_ticks`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "display/display_kernels.h"
#include "render/cell_image.h"
#include "image/png_encoder.h"

namespace tmorph {

struct ColourBarTick {
  double value = 0;     // data units (what the label says, parsed back)
  double position = 0;  // n in [0, 1]: 0 at the bottom of the bar, 1 at the top
  std::string label;    // as printed: an integer below 10^7 in full, else %.3g (upper-case exponent)
};

std::vector<ColourBarTick> colour_bar_ticks(const DisplayParams& params, unsigned max_ticks = 6);

// `img` with a label panel right of its colour bar: per tick a 3-pixel mark and the value (bitmap_font.h, dark ink
// on an opaque white panel), and `title` (e.g. the transform, "LOG10"; may be empty) above the top tick when it
// fits. The cells and the bar keep their pixels and places; the image grows to the right only. `bar_height` is the
// bar's height in pixels (cell_image.h: the image's height).
RgbaImage with_colour_bar_labels(const CellImage& img, std::string_view title = {});

// The PNG text entries that say where the cells, the bar and the labels are (x,y,width,height) and the ticks
// drawn (labels joined by ';'), for readers.
PngText colour_bar_layout_text(const CellImage& img, const RgbaImage& labelled);

// Writes `img` with its labelled colour bar as a PNG at `path` (write_png), `text` followed by the layout entries.
void write_labelled_png(const std::string& path, const CellImage& img, PngText text, std::string_view title);

}  // namespace tmorph
