// Exact, mergeable statistics of one pyramid tile (a rectangle of elements of a 2-D view).
//
// Counts are exact. min / max / abs_max are over the finite values (+inf / -inf / 0 when there are
// none), so they are exact at every level. sum and m2 (sum of squared deviations from the mean, over
// the finite values) are float64: merging two tiles follows Chan et al.'s pairwise update, so a tile at
// any level agrees with a direct computation over its elements to float64 rounding (not bit for bit).
// hist counts the finite values in the pyramid's bins (Pyramid::edges), shared by every tile of a
// tensor so that merged counts are exact.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace tmorph {

struct TileStats {
  uint64_t count = 0;  // elements, including NaN and +-Inf
  uint64_t nan = 0, inf = 0, zero = 0;
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  double abs_max = 0, sum = 0, m2 = 0;
  std::vector<uint64_t> hist;

  uint64_t finite() const { return count - nan - inf; }
  double mean() const { return finite() ? sum / static_cast<double>(finite()) : 0.0; }
  // Population standard deviation of the finite values (numpy's default, ddof = 0).
  double std_dev() const { return finite() ? std::sqrt(m2 / static_cast<double>(finite())) : 0.0; }
};

// Adds b into a (Chan's update for m2). Histograms must have the same bins (or b's be empty).
void merge_into(TileStats& a, const TileStats& b);

// Statistics of n finite-or-not float64 values, without a histogram (cells from values; the CPU backend's
// widened level-0 tiles compute each row segment the same way, backends/cpu/widened_tiles.cpp).
TileStats stats_of(const double* values, uint64_t n);

// Fixed little-endian record: 4 x u64 counts, 5 x f64, then hist.size() x u64.
std::vector<uint8_t> encode_tile(const TileStats& t);
// Throws Error(BadInput) naming `where` when the record's size does not match `bins`.
TileStats decode_tile(const uint8_t* data, size_t bytes, size_t bins, const char* where);

}  // namespace tmorph
