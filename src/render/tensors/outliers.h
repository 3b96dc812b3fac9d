// Where a viewer should look in a tensor: the elements of largest magnitude and every NaN and ±Inf, found from
// the stored pyramid (level-0 tiles ranked by their exact abs max and NaN / Inf counts, no data read) and then
// resolved to exact element positions by reading only the chosen tiles' values (cells of one element).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "index/checkpoint_index.h"

namespace tmorph {

class Planner;

struct TensorOutlier {
  std::string kind;  // "abs_max" (a largest-magnitude element), "nan" or "inf"
  uint64_t slice = 0, row = 0, col = 0;  // the element, in the stored view's slice
  uint64_t cell_rows = 1, cell_cols = 1;  // the element lies in [row, row + cell_rows) x [col, col + cell_cols): one
                                          // element except in a tile wider than 256 columns (a vector's), cut in 256
  uint64_t tile_x = 0, tile_y = 0;       // its level-0 tile
  double value = 0;  // abs_max: the element's signed value; nan: NaN; inf: +Inf, its sign unknown (inf_sign_known
                     // false: cell statistics count ±Inf without keeping the sign)
  bool inf_sign_known = true;
};

struct OutlierList {
  std::vector<TensorOutlier> items;  // the abs_max elements by decreasing magnitude, then NaN, then Inf, by position
  uint64_t tiles = 0;                // level-0 tiles ranked
  uint64_t nan = 0, inf = 0;         // the tensor's totals (from the pyramid)
  uint64_t nonfinite_listed_most = 0;  // the most NaN / Inf positions listed (the totals say how many there are)
};

// The `top` tiles of largest abs max each give their largest-magnitude element (so `top` elements, one per tile:
// an outlier channel shows as several tiles, not one tile's many elements); NaN and Inf positions are listed up
// to `most_nonfinite` each. Throws Unavailable naming the tensor when it has no stored pyramid.
OutlierList find_outliers(const CheckpointIndex& index, size_t i, const Planner& planner, unsigned top, unsigned most_nonfinite);

// {tensor, tiles_ranked, nan, inf, nonfinite_listed_most, outliers: [{kind, slice, row, col, cell: [rows, cols], tile: [x, y],
// value}]}; value is a number, or the strings "NaN", "Inf", "-Inf", "±Inf" (JSON has no non-finite numbers).
nlohmann::json outliers_json(const OutlierList& list, const CheckpointTensor& t);

}  // namespace tmorph
