// The tensor view requests' parameter declarations (view_params.h).
#include "render/tensors/view_params.h"

#include <limits>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

using K = ParamKind;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMaxIndex = 9007199254740992.0;  // 2^53: tile indices, slices, rows and columns

constexpr ParamSpec kLevel{"level", "level", "--level", K::Count, 0, 63, false, "", "", 1,
                           "pyramid level (0: 256 x 256-element tiles; each level halves the grid)"};
constexpr ParamSpec kX{"x", "x", "", K::Count, 0, kMaxIndex, false, "", "", 1, "the tile's column at the level"};
constexpr ParamSpec kY{"y", "y", "", K::Count, 0, kMaxIndex, false, "", "", 1, "the tile's row at the level"};
constexpr ParamSpec kTile{"", "tile", "--tile", K::Counts, 0, kMaxIndex, false, "", "X,Y", 2, "the tile's column and row at the level"};
constexpr ParamSpec kSlice{"slice", "slice", "--slice", K::Count, 0, kMaxIndex, false, "", "", 1, "slice of a tensor of rank >= 3"};
constexpr ParamSpec kStat{"stat", "stat", "--stat", K::Choice, 0, 0, false, "", "mean|min|max|abs_max|std|envelope", 1,
                          "statistic per cell"};

constexpr ParamSpec kTileParams[] = {
    kLevel, kX, kY, kTile, kSlice,
    {"format", "", "", K::Choice, 0, 0, false, "", "binary|json", 1, "the tile record as stored, or its JSON"},
};
constexpr ParamSpec kCells[] = {kLevel, kX, kY, kTile, kSlice, kStat};
constexpr ParamSpec kRender[] = {
    kLevel, kX, kY, kTile, kSlice, kStat,
    {"transform", "transform", "--transform", K::Choice, 0, 0, false, "", "linear|log|signed-log", 1,
     "linear, log (log10 |x|), signed-log (sign(x) log1p |x|)"},
    {"log_floor", "log_floor", "--log-floor", K::Number, 0, kInf, true, "", "", 1, "smallest |x| under the log transform"},
    {"colormap", "colormap", "--colormap", K::Text, 0, 0, false, "", "", 1, "a colour map's name"},
    {"limits", "limits", "--limits", K::Numbers, -kInf, kInf, false, "data units", "LO,HI", 2, "the colour scale's ends"},
    {"format", "", "", K::Choice, 0, 0, false, "", "png|json", 1, "the image, or what was drawn as JSON"},
};
constexpr ParamSpec kOutliers[] = {
    {"top", "", "", K::Count, 0, 256, false, "", "", 1, "level-0 tiles of largest abs max, each resolved to its element"},
    {"nonfinite", "", "", K::Count, 0, 1024, false, "", "", 1, "NaN and Inf positions, of each"},
};
constexpr ParamSpec kProfile[] = {
    {"row", "", "", K::Count, 0, kMaxIndex, false, "", "", 1, "the view's row to read"},
    {"col", "", "", K::Count, 0, kMaxIndex, false, "", "", 1, "the view's column to read"},
    kSlice,
};

const OperationSchema kOperations[] = {{"tensor.tile", kTileParams},
                                       {"tensor.cells", kCells},
                                       {"tensor.render", kRender},
                                       {"tensor.outliers", kOutliers},
                                       {"tensor.profile", kProfile}};

}  // namespace

const OperationSchema& tensor_tile_params() { return kOperations[0]; }
const OperationSchema& tensor_cells_params() { return kOperations[1]; }
const OperationSchema& tensor_render_params() { return kOperations[2]; }
const OperationSchema& tensor_outliers_params() { return kOperations[3]; }
const OperationSchema& tensor_profile_params() { return kOperations[4]; }

std::pair<double, double> check_limits(Face face, double lo, double hi) {
  if (lo > hi)
    throw Error(ErrorKind::InvalidArgument, spelled(tensor_render_params().at("limits"), face) + ": LO " + number_text(lo) +
                                                " is above HI " + number_text(hi));
  return {lo, hi};
}

}  // namespace tmorph
