// Where the cells of an image come from: a tensor's stored pyramid (one tile per cell, no data read)
// when it holds the requested resolution, else the tensor's values (read once, any cell size).
//
// Requests, in the stored layout (lod/pyramid.h):
// - overview (no level, no tile): the finest stored level that fits in N cells along the longer side
//   (N = overview_cells, 1024 by default) when level 0 gives at least N / 2 there; otherwise cells from
//   the values, of the power-of-two size that fits the slice in N cells.
// - level L: every level-L tile of the slice is a cell.
// - level L and tile (X, Y): the elements of that tile, cut into 256 cells per side (fewer when the
//   tile is narrower): cells are level L-8 tiles when L >= 8, else computed from the values.
// A view other than the stored one (--view) is always computed from the values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "display/display_kernels.h"
#include "index/checkpoint_index.h"
#include "lod/cells.h"
#include "render/cell_image.h"

namespace tmorph {

class Planner;

struct SourceRequest {
  int level = -1;  // -1: overview
  uint64_t slice = 0;
  std::optional<std::pair<uint64_t, uint64_t>> tile;  // (X = column, Y = row) at `level`
  std::string view;                                   // "S,R" or empty for the stored view
  uint64_t overview_cells = 1024;                     // overview: at most this many cells per side
};

struct CellSource {
  CellGrid grid;
  std::string source;   // "pyramid level N" or "values"
  PyramidLayout layout; // the layout levels and tiles refer to
  TileRange region;     // the elements drawn, in the slice
  int level = -1;
};

// The stored pyramid of tensor i; throws Unavailable naming the tensor when it has none.
CheckpointIndex::PyramidInfo stored_pyramid(const CheckpointIndex& index, size_t i);

// Throws InvalidArgument naming the grid when (level, slice, tx, ty) is outside the layout.
void check_tile(const PyramidLayout& layout, unsigned level, uint64_t slice, uint64_t tx, uint64_t ty);

CellSource cells_for(const CheckpointIndex& index, size_t i, const Planner& planner, const SourceRequest& req);

// RdBu_r when the values drawn have both signs (mean, min, max, envelope), else viridis.
std::string_view default_colormap(const std::vector<double>& drawn, CellStat stat);

// JSON for programs: what was drawn (tensor, view, layout, level, region, cells, source).
nlohmann::json source_json(const CellSource& s, const CheckpointTensor& t);
// One tile's statistics with the elements it covers and its histogram.
nlohmann::json tile_json(const CheckpointIndex::PyramidInfo& info, const CheckpointTensor& t, unsigned level,
                         uint64_t slice, uint64_t tx, uint64_t ty, const TileStats& tile);

}  // namespace tmorph
