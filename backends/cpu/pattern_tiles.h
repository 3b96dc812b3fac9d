// TM_OP_LOD_TILE_STATS's TM_TILE_PATTERNS method (op_contracts.h): level-0 pyramid tiles of 8- and 16-bit
// floats (bf16, f16, the float8 formats) and 8-bit integers from the counts of their bit patterns.
//
// A tile's elements are counted by raw bit pattern, then its statistics follow from the few thousand
// patterns it holds instead of from its 65,536 elements: counts, min, max and abs_max exact (min and
// max by order key, so -0 is below +0), histogram buckets exact (every pattern lies in one order
// bucket), sum and m2 of the finite values as sums over the distinct patterns of count x (value -
// shift) and count x (value - shift)^2 in float64 (the tile contract of tile_stats.h: to float64
// rounding), with shift the tile's first finite value of its first row; when that sum of squares
// would lose more than 10 bits to cancellation, m2 is summed again about the tile's mean.
//
// Every counted element's pattern is also added to the caller's totals: the tensor's bit-pattern histogram
// (the counts stats.bitpattern_histogram makes), so the statistics pass need not count the patterns again.
//
// The arithmetic depends only on the tile's elements, never on the SIMD target or on how the tensor
// was cut into pieces: pattern p of a 16-bit scan feeds virtual float64 lane p % 32, lanes are reduced
// in a fixed order, and no fused multiply-add is used.
#pragma once

#include <cstdint>
#include <vector>

#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

class PatternTiles {
 public:
  // BF16, F16, F8_E4M3FN, F8_E5M2, I8, U8, BOOL.
  static bool supports(DType dtype);

  explicit PatternTiles(DType dtype);  // dtype: one supports() takes

  // Adds `rows` rows of `cols` elements to the open tile: the first row at `first`, each next one
  // `stride` bytes after the previous. A tile holds at most 65,536 elements. The rows must stay in
  // memory until finish_tile() (a tile whose m2 cancels is counted again).
  void add_rows(const uint8_t* first, uint64_t stride, uint64_t rows, uint64_t cols);

  // Closes the open tile and writes its statistics to t, its finite values' order buckets (the top 8 bits
  // of the order key) to t.buckets; adds the count of every raw bit pattern of its elements (256 or 65,536
  // counts, NaN and infinities included) to totals. The tables are left empty for the next tile.
  void finish_tile(tm_tile_stats_v1& t, uint64_t* totals);

 private:
  void finish_table_scan(tm_tile_stats_v1& t, uint32_t* buckets);  // 8-bit dtypes: every pattern
  void finish_range_scan(tm_tile_stats_v1& t, uint32_t* buckets);  // 16-bit floats: the patterns the range pass saw

  DType dtype_;
  size_t width_;
  std::vector<uint16_t> even_, odd_;  // counts of the open tile, elements at even / odd positions of a row
  uint64_t* totals_ = nullptr;  // the caller's, during finish_tile
  std::vector<double> value_;   // 8-bit dtypes: the value of every pattern
  std::vector<uint8_t> key_;    // 8-bit dtypes: the order key of every pattern (= its bucket)
  struct Part {
    const uint8_t* first;
    uint64_t stride, rows, cols;
  };
  std::vector<Part> parts_;     // the open tile's rows, as added
  uint64_t count_ = 0;          // elements in the open tile
  double shift_ = 0;
  bool shift_set_ = false;
  // 16-bit floats, over the open tile's elements: order keys of the finite values (min, max), finite
  // magnitudes (without the sign) other than zero (low) and with zero (high), and the count of
  // non-finite values.
  uint32_t key_min_ = 0xFFFF, key_max_ = 0, mag_low_ = 0xFFFF, mag_high_ = 0;
  uint64_t non_finite_ = 0;
};

}  // namespace tmorph::cpu
