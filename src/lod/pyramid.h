// An exact statistics pyramid over a tensor's 2-D view (view.h), built in one streaming pass.
//
// Level 0 cuts every slice of the view into tiles of tile_rows x tile_cols elements (256 x 256 by
// default; a view with fewer than 256 rows gets tiles as tall as the next power of two of its rows and
// as wide as keeps them at 65,536 elements, so a vector is tiled 1 x 65,536). Tiles on the right and
// bottom edges are partial. Level L + 1 merges the 2 x 2 level-L tiles under it (children that do not
// exist are skipped), until one tile covers the slice. Tile (L, ty, tx) covers rows
// [ty * tile_rows * 2^L, min(rows, (ty + 1) * tile_rows * 2^L)) and the same for columns.
//
// Histogram: every tile counts its finite values in bins shared by the whole tensor. A value's bucket
// is the top 8 bits of its order key (the bit pattern remapped so that unsigned order is value order),
// which needs no knowledge of the data before it is read; at the end the occupied buckets from the
// lowest to the highest are grouped into at most 32 bins of consecutive buckets. So bin edges are exact
// element values (the smallest value of each bin's first bucket; the outer edges are the finite min
// and max), spaced roughly logarithmically for floats, and merged counts stay exact.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "lod/tile_stats.h"
#include "lod/view.h"
#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph {

struct TileRange {
  uint64_t row_begin = 0, row_end = 0, col_begin = 0, col_end = 0;  // [begin, end) in the slice
};

struct PyramidLayout {
  View2D view;
  uint32_t tile_rows = 256, tile_cols = 256;
  struct Grid {
    uint64_t rows = 1, cols = 1;  // tiles in y and x at one level
  };
  std::vector<Grid> levels;  // levels[0] is the finest; levels.back() is 1 x 1

  TileRange range(unsigned level, uint64_t ty, uint64_t tx) const;
  uint64_t tiles_per_slice(unsigned level) const { return levels[level].rows * levels[level].cols; }
};

// The layout for `view` with the default tile shape (above).
PyramidLayout make_pyramid_layout(const View2D& view);

struct Pyramid {
  PyramidLayout layout;
  std::vector<double> edges;   // histogram bins + 1 (empty when no value is finite)
  std::vector<TileStats> tiles;  // level by level, slice by slice, row-major within a slice

  const TileStats& tile(unsigned level, uint64_t slice, uint64_t ty, uint64_t tx) const;
  // Every slice's top tile merged in slice order: the whole tensor.
  TileStats summary() const;
  size_t level_offset(unsigned level) const;
};

// How level-0 tiles are computed: the method of TM_OP_LOD_TILE_STATS (op_contracts.h) the builder asks for.
// - Simd (the default): 8- and 16-bit floats and 8-bit integers from their bit-pattern counts
//   (TM_TILE_PATTERNS) when a band's rows before its last fit in kMaxBandBytes; else as Segments.
// - Segments: f32, bf16 and f16 a row segment at a time in 16 float64 lanes (TM_TILE_SEGMENTS), every other
//   dtype widened to float64 a segment at a time (TM_TILE_WIDENED).
// - Scalar: every dtype widened (TM_TILE_WIDENED), the reference the others are tested against (same counts,
//   extremes and histograms; sum and m2 to float64 rounding).
enum class TileKernels { Simd, Segments, Scalar };

// The most a band's rows before its last may take for the pattern method (its choice, kept from when the
// builder copied only that method's bands).
constexpr uint64_t kMaxBandBytes = uint64_t{64} << 20;

// Runs TM_OP_LOD_TILE_STATS on one call: `elements` elements of dtype at input (params.rows x params.cols)
// into out[0, tiles). The placed op (ops/tile_stats.h makes one from a planner), or anything that keeps the
// contract. Throws on failure.
using TileStatsKernel = std::function<void(DType dtype, const tm_tile_stats_params_v1& params, const void* input,
                                           uint64_t elements, tm_tile_stats_v1* out, uint64_t tiles)>;

// The method a builder with `kernels` asks for on a view of dtype.
tm_tile_stats_method tile_stats_method(DType dtype, const View2D& view, TileKernels kernels);

// Feeds a tensor's elements in flat (row-major) order, in pieces of any size; the result does not
// depend on how the elements were cut into pieces. Level-0 tiles are computed by `kernel` a band (the
// rows of one row of tiles) at a time, where a feed holds the whole band, else from a copy of it; a view
// of one row a run of whole tiles at a time.
class PyramidBuilder {
 public:
  PyramidBuilder(DType dtype, const View2D& view, TileStatsKernel kernel, TileKernels kernels = TileKernels::Simd);
  ~PyramidBuilder();
  PyramidBuilder(const PyramidBuilder&) = delete;
  PyramidBuilder& operator=(const PyramidBuilder&) = delete;

  void feed(const void* data, uint64_t elements);
  // Throws Error(Internal) unless exactly slices x rows x cols elements were fed.
  Pyramid finish();

  // With the pattern method, the count of every fed element's raw bit pattern (256 or 65,536 counts: what
  // stats.bitpattern_histogram counts), complete once every element was fed; else null.
  const std::vector<uint64_t>* pattern_counts() const;

  // A feed size at most `max_elements`: whole bands (a feed that holds a whole band is tiled where it lies,
  // without a copy) when a band fits, whole tiles for a view of one row; else max_elements.
  uint64_t piece_elements(uint64_t max_elements) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// The pyramid of a tensor in memory (tests, and views that differ from the stored one).
Pyramid build_pyramid(DType dtype, const View2D& view, const void* data, const TileStatsKernel& kernel,
                      TileKernels kernels = TileKernels::Simd);

// n elements of dtype at src as float64 (exact for every dtype but 64-bit integers beyond 2^53).
void decode_to_double(DType dtype, const uint8_t* src, uint64_t n, double* dst);


}  // namespace tmorph
