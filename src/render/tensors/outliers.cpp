// Outliers of a tensor from its pyramid, resolved on the chosen tiles' values (outliers.h).
#include "render/tensors/outliers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "render/tensors/cell_source.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

struct RankedTile {
  uint64_t slice = 0, tx = 0, ty = 0;
  TileStats stats;
};

// The cells of one level-0 tile (one element each unless the tile is wider than 256 columns: a vector's), read
// once per tile however many outliers it holds.
class TileCells {
 public:
  TileCells(const CheckpointIndex& index, size_t i, const Planner& planner) : index_(index), i_(i), planner_(planner) {}

  const CellSource& of(const RankedTile& t) {
    const auto key = std::make_tuple(t.slice, t.ty, t.tx);
    auto it = read_.find(key);
    if (it == read_.end()) {
      SourceRequest req;
      req.level = 0;
      req.slice = t.slice;
      req.tile = std::make_pair(t.tx, t.ty);
      it = read_.emplace(key, cells_for(index_, i_, planner_, req)).first;
    }
    return it->second;
  }

 private:
  const CheckpointIndex& index_;
  size_t i_;
  const Planner& planner_;
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, CellSource> read_;
};

TensorOutlier at_cell(const char* kind, const RankedTile& t, const CellSource& s, uint64_t r, uint64_t c) {
  TensorOutlier o;
  o.kind = kind;
  o.slice = t.slice, o.tile_x = t.tx, o.tile_y = t.ty;
  o.row = s.region.row_begin + r * s.grid.cell_rows;
  o.col = s.region.col_begin + c * s.grid.cell_cols;
  o.cell_rows = s.grid.cell_rows, o.cell_cols = s.grid.cell_cols;
  return o;
}

}  // namespace

OutlierList find_outliers(const CheckpointIndex& index, size_t i, const Planner& planner, unsigned top, unsigned most_nonfinite) {
  const CheckpointIndex::PyramidInfo info = stored_pyramid(index, i);
  const PyramidLayout& l = info.layout;
  const auto& g = l.levels[0];
  std::vector<RankedTile> tiles;
  for (uint64_t slice = 0; slice < l.view.slices; ++slice) {
    std::vector<TileStats> level0 = index.load_tiles(i, info, 0, slice, 0, g.rows, 0, g.cols);
    if (level0.size() != g.rows * g.cols)
      throw Error(ErrorKind::BadInput, "the pyramid of " + index.checkpoint().tensors[i].name + " holds " + std::to_string(level0.size()) +
                                           " level-0 tiles in slice " + std::to_string(slice) + ", its layout " + std::to_string(g.rows * g.cols));
    for (uint64_t k = 0; k < level0.size(); ++k) tiles.push_back({slice, k % g.cols, k / g.cols, std::move(level0[k])});
  }
  OutlierList out;
  out.tiles = tiles.size();
  out.nonfinite_listed_most = most_nonfinite;
  for (const auto& t : tiles) out.nan += t.stats.nan, out.inf += t.stats.inf;
  TileCells cells(index, i, planner);

  // The largest-magnitude element of each of the `top` tiles of largest abs max (ties: the first tile in order).
  std::vector<const RankedTile*> ranked;
  for (const auto& t : tiles)
    if (t.stats.finite() > 0 && t.stats.abs_max > 0) ranked.push_back(&t);
  const size_t take = std::min<size_t>(top, ranked.size());
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(take), ranked.end(),
                    [](const RankedTile* a, const RankedTile* b) {
                      if (a->stats.abs_max != b->stats.abs_max) return a->stats.abs_max > b->stats.abs_max;
                      return std::tie(a->slice, a->ty, a->tx) < std::tie(b->slice, b->ty, b->tx);
                    });
  for (size_t k = 0; k < take; ++k) {
    const RankedTile& t = *ranked[k];
    const CellSource& s = cells.of(t);
    size_t best = s.grid.cells.size();
    for (size_t c = 0; c < s.grid.cells.size(); ++c)
      if (s.grid.cells[c].finite() && (best == s.grid.cells.size() || s.grid.cells[c].abs_max > s.grid.cells[best].abs_max)) best = c;
    if (best == s.grid.cells.size()) continue;
    const TileStats& e = s.grid.cells[best];
    TensorOutlier o = at_cell("abs_max", t, s, best / s.grid.cols, best % s.grid.cols);
    o.value = std::fabs(e.max) >= std::fabs(e.min) ? e.max : e.min;
    out.items.push_back(o);
  }

  // NaN, then Inf, in the tiles' order, up to most_nonfinite of each.
  const auto list_nonfinite = [&](const char* kind, uint64_t TileStats::*count) {
    unsigned listed = 0;
    for (const auto& t : tiles) {
      if (listed >= most_nonfinite) return;
      if (t.stats.*count == 0) continue;
      const CellSource& s = cells.of(t);
      for (size_t c = 0; c < s.grid.cells.size() && listed < most_nonfinite; ++c) {
        if (s.grid.cells[c].*count == 0) continue;
        TensorOutlier o = at_cell(kind, t, s, c / s.grid.cols, c % s.grid.cols);
        o.value = count == &TileStats::nan ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
        o.inf_sign_known = false;  // cell statistics count ±Inf without keeping its sign
        out.items.push_back(o);
        ++listed;
      }
    }
  };
  list_nonfinite("nan", &TileStats::nan);
  list_nonfinite("inf", &TileStats::inf);
  return out;
}

nlohmann::json outliers_json(const OutlierList& list, const CheckpointTensor& t) {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& o : list.items) {
    nlohmann::json v;
    if (std::isnan(o.value)) v = "NaN";
    else if (std::isinf(o.value)) v = !o.inf_sign_known ? "±Inf" : o.value > 0 ? "Inf" : "-Inf";
    else v = o.value;
    items.push_back({{"kind", o.kind}, {"slice", o.slice}, {"row", o.row}, {"col", o.col}, {"cell", {o.cell_rows, o.cell_cols}},
                     {"tile", {o.tile_x, o.tile_y}}, {"value", v}});
  }
  return {{"tensor", t.name}, {"tiles_ranked", list.tiles}, {"nan", list.nan}, {"inf", list.inf},
          {"nonfinite_listed_most", list.nonfinite_listed_most}, {"outliers", items}};
}

}  // namespace tmorph
