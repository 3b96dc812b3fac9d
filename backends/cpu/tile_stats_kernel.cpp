#include "tile_stats_kernel.h"

#include <algorithm>
#include <bit>
#include <memory>
#include <vector>

#include "pattern_tiles.h"
#include "tensormorph/contract_math.h"
#include "tensormorph/dtype.h"
#include "tile_kernels.h"
#include "widened_tiles.h"

namespace tmorph::cpu {

std::string tile_stats_call_problem(const tm_kernel_call_v1& c) {
  return tile_stats_problem(c);
}

void tile_stats(const tm_kernel_call_v1& c) {
  const auto& p = *static_cast<const tm_tile_stats_params_v1*>(c.params);
  const DType dtype = static_cast<DType>(c.dtype);
  const size_t width = dtype_size(dtype);
  const uint64_t tiles = (p.cols + p.tile_cols - 1) / p.tile_cols, stride = p.cols * width;
  const auto* in = static_cast<const uint8_t*>(c.input);
  auto* out = static_cast<tm_tile_stats_v1*>(c.output);
  const auto columns = [&](uint64_t t) { return std::min<uint64_t>(p.cols, (t + 1) * p.tile_cols) - t * p.tile_cols; };
  switch (p.method) {
    case TM_TILE_PATTERNS: {
      // One pattern table per thread and dtype, reused: its tables are left empty after every tile.
      thread_local std::unique_ptr<PatternTiles> by_dtype[TM_DTYPE_COUNT_];
      thread_local std::vector<uint64_t> scratch;
      auto& tiles_of = by_dtype[c.dtype];
      if (!tiles_of) tiles_of = std::make_unique<PatternTiles>(dtype);
      uint64_t* totals = p.pattern_counts;
      if (!totals) scratch.assign(size_t{1} << (8 * width), 0), totals = scratch.data();
      for (uint64_t t = 0; t < tiles; ++t) {
        tiles_of->add_rows(in + t * p.tile_cols * width, stride, p.rows, columns(t));
        tiles_of->finish_tile(out[t], totals);
      }
      return;
    }
    case TM_TILE_SEGMENTS: {
      TileSums sums;
      for (uint64_t t = 0; t < tiles; ++t) {
        out[t] = tm_tile_stats_v1{};
        start_tile(sums);
        for (uint64_t r = 0; r < p.rows; ++r)
          add_tile_segment(dtype, in + r * stride + t * p.tile_cols * width, columns(t), sums, out[t].buckets);
        finish_tile(sums, out[t]);
      }
      return;
    }
    default: {
      std::vector<double> values(std::min<uint64_t>(p.cols, p.tile_cols));
      std::vector<uint8_t> keys(values.size());
      for (uint64_t t = 0; t < tiles; ++t)
        widened_tile(dtype, in + t * p.tile_cols * width, stride, p.rows, columns(t), values.data(), keys.data(), out[t]);
      return;
    }
  }
}

}  // namespace tmorph::cpu
