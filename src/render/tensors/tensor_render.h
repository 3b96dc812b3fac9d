// One tensor drawn (what `tensormorph render PATH NAME` writes and Checkpoint.render returns) and one tile's
// exact statistics (`tensormorph tile`, Checkpoint.tile), from an index that holds the tensor's statistics.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "render/figure_frame.h"
#include "render/tensors/cell_source.h"

namespace tmorph {

struct TensorRenderRequest {
  SourceRequest source;     // overview, a level, or a tile of a level; slice; view
  CellStat stat = CellStat::Mean;
  DisplayRequest display;   // transform, log floor, limits (its colormap is replaced by the one below)
  std::string colormap;     // a name colormap() knows; empty: chosen from the values drawn (default_colormap)
};

struct TensorRender {
  CellStat stat = CellStat::Mean;
  CellSource source;
  CellImage image;
  // source_json plus stat, transform, colormap, limits, placement, image {width, height, scale}, histogram.
  nlohmann::json report;
};

// Throws what cells_for and render_cells throw (a level or tile outside the layout, no pyramid, …).
TensorRender render_tensor(const CheckpointIndex& index, size_t i, const Planner& planner, const TensorRenderRequest& request);

// The PNG text metadata of render_tensor's image: the stat, limits, tensor, source, region, slice, cell size.
PngText tensor_render_text(const TensorRender& r, const CheckpointTensor& t, uint64_t slice);

// The written figure's title and axes (figure_frame.h): the tensor's name (and slice) and the statistic drawn; the
// element indices of the region drawn, columns under the cells and rows left of them.
FigureFrameSpec tensor_figure_frame(const TensorRender& r, const CheckpointTensor& t, uint64_t slice);

// tile_json of tile (tx, ty) of `level` and `slice` of tensor i's stored pyramid. Throws Unavailable when the
// tensor has no pyramid, InvalidArgument outside the layout, BadInput when the index lacks a tile it lists.
nlohmann::json tile_document(const CheckpointIndex& index, size_t i, unsigned level, uint64_t slice, uint64_t tx, uint64_t ty);

}  // namespace tmorph
