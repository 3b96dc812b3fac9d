#include "render/tensors/cell_source.h"

#include <algorithm>
#include <cmath>

#include "checkpoint/value_reader.h"
#include "core/json_number.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

constexpr uint64_t kTileCells = 256;

CellGrid from_values(const CheckpointIndex& index, size_t i, const Planner& planner, const View2D& view, uint64_t slice,
                     const TileRange& r, uint64_t cell_rows, uint64_t cell_cols) {
  ValueReader reader(index.checkpoint(), index.checkpoint().tensors[i], planner, view);
  return cells_from_values([&](uint64_t row, uint64_t c0, uint64_t c1, double* out) { reader.read(slice, row, c0, c1, out); },
                           r, cell_rows, cell_cols);
}

}  // namespace

CheckpointIndex::PyramidInfo stored_pyramid(const CheckpointIndex& index, size_t i) {
  auto info = index.load_pyramid_info(i);
  if (!info)
    throw Error(ErrorKind::Unavailable, index.checkpoint().tensors[i].name +
                                            ": no statistics pyramid is stored for this tensor (pyramids are built "
                                            "for dense dtypes while indexing; quantized tensors are drawn from their "
                                            "values by `render`)");
  return std::move(*info);
}

void check_tile(const PyramidLayout& layout, unsigned level, uint64_t slice, uint64_t tx, uint64_t ty) {
  if (level >= layout.levels.size())
    throw Error(ErrorKind::InvalidArgument, "--level " + std::to_string(level) + ": the pyramid has levels 0.." +
                                                std::to_string(layout.levels.size() - 1));
  if (slice >= layout.view.slices)
    throw Error(ErrorKind::InvalidArgument, "--slice " + std::to_string(slice) + ": the view has " +
                                                std::to_string(layout.view.slices) + " slice(s)");
  const auto& g = layout.levels[level];
  if (tx >= g.cols || ty >= g.rows)
    throw Error(ErrorKind::InvalidArgument, "--tile " + std::to_string(tx) + "," + std::to_string(ty) + ": level " +
                                                std::to_string(level) + " has " + std::to_string(g.cols) + " x " +
                                                std::to_string(g.rows) + " tiles (X < " + std::to_string(g.cols) +
                                                ", Y < " + std::to_string(g.rows) + ")");
}

CellSource cells_for(const CheckpointIndex& index, size_t i, const Planner& planner, const SourceRequest& req) {
  const CheckpointTensor& t = index.checkpoint().tensors[i];
  std::optional<CheckpointIndex::PyramidInfo> info;
  View2D view = default_view(t.shape);
  if (!req.view.empty()) view = parse_view(req.view, t.shape);
  if (req.view.empty() || view == default_view(t.shape)) info = index.load_pyramid_info(i);
  if (info) view = info->layout.view;
  CellSource s;
  s.layout = info ? info->layout : make_pyramid_layout(view);
  s.level = req.level;
  const PyramidLayout& l = s.layout;
  if (req.slice >= view.slices)
    throw Error(ErrorKind::InvalidArgument, "--slice " + std::to_string(req.slice) + ": the view has " +
                                                std::to_string(view.slices) + " slice(s)");
  const auto stored_level = [&](unsigned level, uint64_t ty0, uint64_t ty1, uint64_t tx0, uint64_t tx1) {
    s.source = "pyramid level " + std::to_string(level);
    s.grid = cells_from_tiles(l, level, ty1 - ty0, tx1 - tx0, index.load_tiles(i, *info, level, req.slice, ty0, ty1, tx0, tx1));
  };
  const auto values = [&](uint64_t cell_rows, uint64_t cell_cols) {
    s.source = "values";
    s.grid = from_values(index, i, planner, view, req.slice, s.region, cell_rows, cell_cols);
  };

  if (req.tile && req.level < 0) throw Error(ErrorKind::InvalidArgument, "--tile needs --level");
  if (req.level < 0) {
    s.region = {0, view.rows, 0, view.cols};
    const auto& g0 = l.levels[0];
    const uint64_t most = std::max<uint64_t>(1, req.overview_cells);
    if (info && std::max(g0.rows, g0.cols) >= most / 2) {
      unsigned level = 0;
      while (std::max(l.levels[level].rows, l.levels[level].cols) > most) ++level;
      s.level = static_cast<int>(level);
      stored_level(level, 0, l.levels[level].rows, 0, l.levels[level].cols);
    } else {
      const uint64_t c = cell_size_for(view.rows, view.cols, most);
      values(view.rows == 1 ? 1 : c, c);
    }
    return s;
  }
  const unsigned level = static_cast<unsigned>(req.level);
  if (!req.tile) {
    check_tile(l, level, req.slice, 0, 0);
    s.region = {0, view.rows, 0, view.cols};
    if (info) stored_level(level, 0, l.levels[level].rows, 0, l.levels[level].cols);
    else values(uint64_t{l.tile_rows} << level, uint64_t{l.tile_cols} << level);
    return s;
  }
  const auto [tx, ty] = *req.tile;
  check_tile(l, level, req.slice, tx, ty);
  s.region = l.range(level, ty, tx);
  const uint64_t cell_rows = std::max<uint64_t>(1, (uint64_t{l.tile_rows} << level) / kTileCells);
  const uint64_t cell_cols = std::max<uint64_t>(1, (uint64_t{l.tile_cols} << level) / kTileCells);
  if (info && level >= 8 && cell_rows == uint64_t{l.tile_rows} << (level - 8) &&
      cell_cols == uint64_t{l.tile_cols} << (level - 8)) {
    const unsigned fine = level - 8;
    const auto& g = l.levels[fine];
    stored_level(fine, std::min(g.rows, ty * kTileCells), std::min(g.rows, (ty + 1) * kTileCells),
                 std::min(g.cols, tx * kTileCells), std::min(g.cols, (tx + 1) * kTileCells));
  } else {
    values(cell_rows, cell_cols);
  }
  return s;
}

std::string_view default_colormap(const std::vector<double>& drawn, CellStat stat) {
  if (stat == CellStat::AbsMax || stat == CellStat::Std) return "viridis";
  bool negative = false, positive = false;
  for (double v : drawn) negative |= v < 0, positive |= v > 0;
  return negative && positive ? "RdBu_r" : "viridis";
}

nlohmann::json source_json(const CellSource& s, const CheckpointTensor& t) {
  const View2D& v = s.layout.view;
  return {{"tensor", t.name},
          {"shape", t.shape},
          {"view", {{"spec", view_spec(v)}, {"slices", v.slices}, {"rows", v.rows}, {"cols", v.cols}}},
          {"tile_size", {s.layout.tile_rows, s.layout.tile_cols}},
          {"levels", s.layout.levels.size()},
          {"level", s.level < 0 ? nlohmann::json(nullptr) : nlohmann::json(s.level)},
          {"source", s.source},
          {"rows", {s.region.row_begin, s.region.row_end}},
          {"cols", {s.region.col_begin, s.region.col_end}},
          {"cells", {s.grid.rows, s.grid.cols}},
          {"cell_size", {s.grid.cell_rows, s.grid.cell_cols}}};
}

nlohmann::json tile_json(const CheckpointIndex::PyramidInfo& info, const CheckpointTensor& t, unsigned level,
                         uint64_t slice, uint64_t tx, uint64_t ty, const TileStats& tile) {
  const TileRange r = info.layout.range(level, ty, tx);
  const View2D& v = info.layout.view;
  return {{"tensor", t.name},
          {"shape", t.shape},
          {"view", {{"spec", view_spec(v)}, {"slices", v.slices}, {"rows", v.rows}, {"cols", v.cols}}},
          {"level", level},
          {"levels", info.layout.levels.size()},
          {"grid", {info.layout.levels[level].cols, info.layout.levels[level].rows}},
          {"tile", {tx, ty}},
          {"slice", slice},
          {"tile_size", {info.layout.tile_rows, info.layout.tile_cols}},
          {"rows", {r.row_begin, r.row_end}},
          {"cols", {r.col_begin, r.col_end}},
          {"stats",
           {{"count", tile.count},
            {"finite_count", tile.finite()},
            {"nan_count", tile.nan},
            {"inf_count", tile.inf},
            {"zero_count", tile.zero},
            {"min", json_number(tile.min)},
            {"max", json_number(tile.max)},
            {"abs_max", json_number(tile.abs_max)},
            {"sum", json_number(tile.sum)},
            {"mean", json_number(tile.mean())},
            {"std", json_number(tile.std_dev())}}},
          {"histogram", {{"edges", json_numbers(info.edges)}, {"counts", tile.hist}}}};
}

}  // namespace tmorph
