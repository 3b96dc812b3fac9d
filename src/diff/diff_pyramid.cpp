#include "diff/diff_pyramid.h"

#include <algorithm>
#include <cmath>

#include "support/thread_pool.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

constexpr size_t kBuckets = TM_DIFF_BUCKETS;
constexpr size_t kMaxBins = 32;
constexpr uint64_t kPairsPerCall = 65536;  // rows of a band go to the kernel in calls of about this many pairs

// Level-0 tiles of one slice's band (a row of tiles), columns [tx0, tx1): rows read, then added to the tiles by
// the placed kernel a few rows per call.
void build_band(DiffPairReader& reader, const PlacedDiffTiles& kernel, const PyramidLayout& l, uint64_t slice, uint64_t ty,
                uint64_t tx0, uint64_t tx1, tm_diff_tile_v1* tiles, std::vector<double>& a, std::vector<double>& b) {
  const TileRange first = l.range(0, ty, tx0), last = l.range(0, ty, tx1 - 1);
  const uint64_t c0 = first.col_begin, width = last.col_end - c0;
  const uint64_t per_call = std::max<uint64_t>(1, kPairsPerCall / width);
  a.resize(per_call * width), b.resize(per_call * width);
  for (uint64_t row = first.row_begin; row < first.row_end; row += per_call) {
    const uint64_t rows = std::min(per_call, first.row_end - row);
    for (uint64_t r = 0; r < rows; ++r) reader.read(slice, row + r, c0, last.col_end, a.data() + r * width, b.data() + r * width);
    kernel.add(a.data(), b.data(), rows, width, l.tile_cols, tiles);
  }
}

}  // namespace

double delta_bucket_boundary(unsigned b) {
  if (b == 128) return 0;
  return b > 128 ? std::ldexp(1.0, static_cast<int>(b) - 192) : -std::ldexp(1.0, 64 - static_cast<int>(b));
}

size_t DiffPyramid::level_offset(unsigned level) const {
  size_t off = 0;
  for (unsigned l = 0; l < level; ++l) off += layout.view.slices * layout.tiles_per_slice(l);
  return off;
}

const DiffTileStats& DiffPyramid::tile(unsigned level, uint64_t slice, uint64_t ty, uint64_t tx) const {
  if (level >= layout.levels.size())
    throw Error(ErrorKind::InvalidArgument, "level " + std::to_string(level) + " does not exist: the difference pyramid has " +
                                                std::to_string(layout.levels.size()) + " levels");
  if (tiles.size() != level_offset(static_cast<unsigned>(layout.levels.size())))
    throw Error(ErrorKind::Internal, "difference pyramid: its tiles were not kept (DiffOptions::keep_tiles)");
  const auto& g = layout.levels[level];
  if (slice >= layout.view.slices || ty >= g.rows || tx >= g.cols)
    throw Error(ErrorKind::InvalidArgument, "tile (" + std::to_string(tx) + ", " + std::to_string(ty) + ") of slice " +
                                                std::to_string(slice) + " does not exist at level " + std::to_string(level));
  return tiles[level_offset(level) + (slice * g.rows + ty) * g.cols + tx];
}

DiffTileStats DiffPyramid::summary() const {
  DiffTileStats all;
  const unsigned top = static_cast<unsigned>(layout.levels.size() - 1);
  for (uint64_t s = 0; s < layout.view.slices; ++s) merge_into(all, tile(top, s, 0, 0));
  return all;
}

DiffPyramid build_diff_pyramid(const View2D& view, const DiffReaderFactory& make_reader, const PlacedDiffTiles& kernel,
                               unsigned threads) {
  DiffPyramid out;
  out.layout = make_pyramid_layout(view);
  const PyramidLayout& l = out.layout;
  const auto& g0 = l.levels[0];
  const size_t tiles0 = view.slices * g0.rows * g0.cols;
  std::vector<tm_diff_tile_v1> level0(tiles0, tm_diff_tile_empty());
  // Work items: (slice, band, column group). Column groups split a band only when bands are too few to keep
  // every thread busy; a quantized row is decoded once per group that reads it.
  threads = std::max(1u, threads);
  const uint64_t bands = view.slices * g0.rows;
  const uint64_t groups = std::clamp<uint64_t>((uint64_t{threads} * 4 + bands - 1) / bands, 1, g0.cols);
  const uint64_t per_group = (g0.cols + groups - 1) / groups;
  ThreadPool::shared(threads).parallel_for(bands * groups, [&](uint64_t begin, uint64_t end, unsigned) {
    const std::unique_ptr<DiffPairReader> reader = make_reader();
    std::vector<double> a, b;
    for (uint64_t item = begin; item < end; ++item) {
      const uint64_t band = item / groups, group = item % groups;
      const uint64_t slice = band / g0.rows, ty = band % g0.rows;
      const uint64_t tx0 = group * per_group, tx1 = std::min(g0.cols, tx0 + per_group);
      if (tx0 >= tx1) continue;
      const size_t first = (slice * g0.rows + ty) * g0.cols + tx0;
      build_band(*reader, kernel, l, slice, ty, tx0, tx1, level0.data() + first, a, b);
    }
  });

  // Shared bins: the occupied buckets lo..hi grouped into at most kMaxBins runs of consecutive buckets.
  bool occupied[kBuckets] = {};
  for (const tm_diff_tile_v1& t : level0)
    for (size_t b = 0; b < kBuckets; ++b) occupied[b] |= t.buckets[b] != 0;
  size_t lo = kBuckets, hi = 0;
  for (size_t b = 0; b < kBuckets; ++b)
    if (occupied[b]) lo = std::min(lo, b), hi = b;
  const size_t span = lo <= hi ? hi - lo + 1 : 0, bins = std::min(kMaxBins, span);
  out.tiles.reserve(tiles0 * 2);
  for (size_t t = 0; t < tiles0; ++t) {
    DiffTileStats tile = from_kernel_tile(level0[t]);
    tile.hist.assign(bins, 0);
    for (size_t b = lo; b <= hi && bins; ++b) tile.hist[(b - lo) * bins / span] += level0[t].buckets[b];
    out.tiles.push_back(std::move(tile));
  }
  size_t child_offset = 0;
  for (unsigned level = 1; level < l.levels.size(); ++level) {
    const auto& cg = l.levels[level - 1];
    const auto& g = l.levels[level];
    for (uint64_t s = 0; s < view.slices; ++s)
      for (uint64_t ty = 0; ty < g.rows; ++ty)
        for (uint64_t tx = 0; tx < g.cols; ++tx) {
          DiffTileStats merged;
          merged.hist.assign(bins, 0);
          for (uint64_t dy = 0; dy < 2; ++dy)
            for (uint64_t dx = 0; dx < 2; ++dx) {
              const uint64_t cy = 2 * ty + dy, cx = 2 * tx + dx;
              if (cy < cg.rows && cx < cg.cols) merge_into(merged, out.tiles[child_offset + (s * cg.rows + cy) * cg.cols + cx]);
            }
          out.tiles.push_back(std::move(merged));
        }
    child_offset += view.slices * l.tiles_per_slice(level - 1);
  }
  if (bins) {
    const DiffTileStats all = out.summary();
    out.edges.resize(bins + 1);
    out.edges[0] = all.min_delta;
    out.edges[bins] = all.max_delta;
    for (size_t j = 1; j < bins; ++j) out.edges[j] = delta_bucket_boundary(static_cast<unsigned>(lo + (j * span + bins - 1) / bins));
  }
  return out;
}

}  // namespace tmorph
