// Images of cell grids (lod/cells.h): one statistic per cell, through the display kernels, with a
// colour bar. The image is what `tensormorph render` writes and what the viewer's tiles show.
//
// Layout: the cells are drawn left to right, top to bottom, each as a block of scale_x x scale_y
// pixels (integer, nearest neighbour), so that the longer side is at least 256 pixels and the image at
// least 32 pixels tall. With the envelope statistic every cell is two blocks wide: its min colour on the
// left, its max colour on the right, so one outlier in a million stays visible at every level. A cell
// without finite values shows the invalid colour (transparent). Right of the cells, after a
// transparent 8-pixel gap, a 16-pixel colour bar runs from the map's last entry (top) to its first
// (bottom) over max(image height, 128) pixels; the limits travel in the PNG's text metadata.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "display/display_kernels.h"
#include "tensormorph/placement.h"
#include "tensormorph/planner.h"
#include "lod/cells.h"
#include "image/png_encoder.h"

namespace tmorph {

enum class CellStat { Mean, Min, Max, AbsMax, Std, Envelope };

// "mean", "min", "max", "abs_max", "std", "envelope". Throws Error(InvalidArgument) naming them.
CellStat parse_cell_stat(std::string_view name);
std::string_view cell_stat_name(CellStat s);

// The statistic of each cell (NaN for a cell without finite values); for Envelope the min of every cell
// followed by the max of every cell.
std::vector<double> cell_values(const CellGrid& g, CellStat stat);

// The colour bar's place right of the cells (pixels).
constexpr uint32_t kColourBarGap = 8, kColourBarWidth = 16;

struct CellImage {
  RgbaImage image;
  uint32_t cells_width = 0, cells_height = 0;  // the cells' block at the top left; the bar starts at cells_width + gap
  DisplayParams params;         // the limits actually used
  DisplayHistogram histogram;   // of the values drawn (both ends of the envelope)
  uint32_t scale_x = 1, scale_y = 1;
  Placement placement;          // where display.colorize ran
};

// Automatic limits (none given in `request`) come from the drawn values. The colours and histogram come
// from the display.colorize op placed by `planner` (byte-identical on every backend).
CellImage render_cells(const CellGrid& g, CellStat stat, const DisplayRequest& request, const Planner& planner);

// Text metadata for the PNG: what was drawn and the limits (exact, %.17g).
PngText cell_image_text(const CellImage& img, CellStat stat, const std::vector<std::pair<std::string, std::string>>& more);

}  // namespace tmorph
