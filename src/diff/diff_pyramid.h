// An exact difference pyramid over a tensor pair's 2-D view, built in one streamed pass that reads both.
//
// The layout is the statistics pyramid's (lod/pyramid.h: make_pyramid_layout): level-0 tiles of
// tile_rows x tile_cols elements, level L + 1 merging the 2 x 2 level-L tiles under it, until one tile
// covers each slice. Each tile holds DiffTileStats (diff_tile.h).
//
// Histogram of Δ: a finite Δ's bucket is its sign and binade, known without seeing the data first:
// Δ >= 0 with 2^k <= Δ < 2^(k+1) is bucket 192 + k, Δ < 0 with 2^k <= |Δ| < 2^(k+1) is bucket 63 - k,
// for k in [-63, 63] (|Δ| >= 2^64 counts as k = 63); |Δ| < 2^-63 is bucket 128 when Δ >= 0 (zero
// included, whatever its sign) and 127 when Δ < 0. At the end the occupied buckets from the lowest to
// the highest are grouped into at most 32 bins of consecutive buckets (bin of bucket b = (b - lo) * bins
// / (hi - lo + 1)), as the statistics pyramid groups its buckets. Edges: the outer ones are the finite
// min Δ and max Δ; an inner edge is the boundary where its bin's first bucket starts: 0 for bucket 128,
// 2^(b - 192) for b > 128, -2^(64 - b) for b < 128. A Δ equal to a negative inner edge lies in the bin
// below that edge (its binade is the lower bucket's); every other Δ equal to an edge lies above it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "diff/diff_tile.h"
#include "lod/pyramid.h"
#include "ops/diff_tiles.h"

namespace tmorph {

struct DiffPyramid {
  PyramidLayout layout;
  std::vector<double> edges;         // histogram bins + 1 (empty when no Δ is finite)
  std::vector<DiffTileStats> tiles;  // level by level, slice by slice, row-major within a slice

  const DiffTileStats& tile(unsigned level, uint64_t slice, uint64_t ty, uint64_t tx) const;
  size_t level_offset(unsigned level) const;
  // Every slice's top tile merged in slice order: the whole tensor pair.
  DiffTileStats summary() const;
};

// The boundary where histogram bucket b starts (b in [1, 255]; the contract of TM_OP_DIFF_TILE_STATS gives a Δ's bucket).
double delta_bucket_boundary(unsigned bucket);

// Reads both tensors' values of one row segment of the pair's view as float64. One reader is used by one
// thread at a time; the builder makes one per piece of work it runs in parallel.
class DiffPairReader {
 public:
  virtual ~DiffPairReader() = default;
  // Elements [col_begin, col_end) of row `row` of slice `slice`: A's into a, B's into b.
  virtual void read(uint64_t slice, uint64_t row, uint64_t col_begin, uint64_t col_end, double* a, double* b) = 0;
};
using DiffReaderFactory = std::function<std::unique_ptr<DiffPairReader>()>;

// Reads every row of the view once (bands of tile rows, and column groups of them when there are fewer
// bands than threads, in parallel on `threads` threads), computes the level-0 tiles with `kernel` (the placed
// diff.tile_stats) and merges the levels. The result does not depend on `threads`.
DiffPyramid build_diff_pyramid(const View2D& view, const DiffReaderFactory& make_reader, const PlacedDiffTiles& kernel,
                               unsigned threads);

}  // namespace tmorph
