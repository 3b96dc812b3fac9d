// Grids of exact cell statistics over a rectangle of a 2-D view: what an image shows, one cell per
// pixel. Cells come either from the values (any cell size; reading the rectangle once) or from a
// stored pyramid level (cell = one tile; no data read).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "lod/pyramid.h"

namespace tmorph {

struct CellGrid {
  uint64_t rows = 0, cols = 0;            // cells
  uint64_t cell_rows = 1, cell_cols = 1;  // elements per cell (edge cells may hold fewer)
  std::vector<TileStats> cells;           // row-major, no histograms
  const TileStats& at(uint64_t r, uint64_t c) const { return cells[r * cols + c]; }
};

// Reads elements [col_begin, col_end) of one row of the rectangle's slice as float64.
using RowSegmentReader = std::function<void(uint64_t row, uint64_t col_begin, uint64_t col_end, double* out)>;

// Cells of cell_rows x cell_cols elements over rows [r.row_begin, r.row_end) x cols [r.col_begin,
// r.col_end), the last row and column of cells partial. The rectangle is read once, row by row.
CellGrid cells_from_values(const RowSegmentReader& read, const TileRange& r, uint64_t cell_rows, uint64_t cell_cols);

// Cells = level-`level` tiles of a pyramid with this layout: `tiles` holds rows x cols of them,
// row-major (a whole level of one slice, or a rectangle of it).
CellGrid cells_from_tiles(const PyramidLayout& layout, unsigned level, uint64_t rows, uint64_t cols,
                          std::vector<TileStats> tiles);

// The cell size (a power of two per axis, equal on both axes unless one axis is a single row) so that
// a rows x cols rectangle becomes at most max_cells cells along its longer side.
uint64_t cell_size_for(uint64_t rows, uint64_t cols, uint64_t max_cells);

}  // namespace tmorph
