// The difference requests' parameter declarations (diff_params.h).
#include "diff/diff_params.h"

namespace tmorph {

namespace {

using K = ParamKind;
constexpr double kMaxIndex = 9007199254740992.0;  // 2^53: tile indices and slices

constexpr ParamSpec kLevel{"level", "level", "--level", K::Count, 0, 63, false, "", "", 1, "the difference pyramid's level (0: 256 x 256-element tiles)"};
constexpr ParamSpec kSlice{"slice", "slice", "", K::Count, 0, kMaxIndex, false, "", "", 1, "the slice of a view of rank > 2"};
constexpr ParamSpec kX{"x", "x", "", K::Count, 0, kMaxIndex, false, "", "", 1, "the tile's column at the level"};
constexpr ParamSpec kY{"y", "y", "", K::Count, 0, kMaxIndex, false, "", "", 1, "the tile's row at the level"};

constexpr ParamSpec kDocument[] = {
    {"top", "top", "--top", K::Count, 1, 1000000, false, "", "", 1, "rows of each ranking"},
};
constexpr ParamSpec kTiles[] = {
    kLevel, kSlice, kX, kY,
    {"window", "", "", K::Counts, 0, 0, false, "", "X0,X1,Y0,Y1", 4, "half-open tile columns and rows of the level"},
};
constexpr ParamSpec kValues[] = {kLevel, kSlice, kX, kY};

const OperationSchema kOperations[] = {{"diff.document", kDocument}, {"diff.tiles", kTiles}, {"diff.values", kValues}};

}  // namespace

const OperationSchema& diff_document_params() { return kOperations[0]; }
const OperationSchema& diff_tiles_params() { return kOperations[1]; }
const OperationSchema& diff_values_params() { return kOperations[2]; }

}  // namespace tmorph
