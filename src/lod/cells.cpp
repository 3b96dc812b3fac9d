#include "lod/cells.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace tmorph {

CellGrid cells_from_values(const RowSegmentReader& read, const TileRange& r, uint64_t cell_rows, uint64_t cell_cols) {
  CellGrid g;
  g.cell_rows = cell_rows, g.cell_cols = cell_cols;
  const uint64_t height = r.row_end - r.row_begin, width = r.col_end - r.col_begin;
  g.rows = (height + cell_rows - 1) / cell_rows;
  g.cols = (width + cell_cols - 1) / cell_cols;
  g.cells.resize(g.rows * g.cols);
  std::vector<double> row(width);
  for (uint64_t y = 0; y < height; ++y) {
    read(r.row_begin + y, r.col_begin, r.col_end, row.data());
    TileStats* line = g.cells.data() + (y / cell_rows) * g.cols;
    if (cell_rows == 1 && cell_cols == 1) {  // one element per cell: its statistics directly
      for (uint64_t cx = 0; cx < g.cols; ++cx) {
        const double x = row[cx];
        TileStats& t = line[cx];
        t.count = 1;
        if (std::isnan(x)) t.nan = 1;
        else if (std::isinf(x)) t.inf = 1;
        else t.zero = x == 0, t.min = t.max = t.sum = x, t.abs_max = std::fabs(x);
      }
      continue;
    }
    for (uint64_t cx = 0; cx < g.cols; ++cx) {
      const uint64_t c0 = cx * cell_cols, n = std::min(width, c0 + cell_cols) - c0;
      merge_into(line[cx], stats_of(row.data() + c0, n));
    }
  }
  return g;
}

CellGrid cells_from_tiles(const PyramidLayout& layout, unsigned level, uint64_t rows, uint64_t cols,
                          std::vector<TileStats> tiles) {
  CellGrid g;
  g.rows = rows, g.cols = cols;
  g.cell_rows = uint64_t{layout.tile_rows} << level;
  g.cell_cols = uint64_t{layout.tile_cols} << level;
  g.cells = std::move(tiles);
  for (auto& t : g.cells) t.hist.clear();
  return g;
}

uint64_t cell_size_for(uint64_t rows, uint64_t cols, uint64_t max_cells) {
  const uint64_t longer = std::max(rows, cols);
  uint64_t s = 1;
  while ((longer + s - 1) / s > max_cells) s *= 2;
  return s;
}

}  // namespace tmorph
