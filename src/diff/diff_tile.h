// Exact, mergeable difference statistics of one tile: a rectangle of element pairs (a from checkpoint A,
// b from checkpoint B, both read as float64: dense dtypes widened exactly, quantized and packed tensors
// dequantized to their float32 values) with Δ = b - a computed in float64.
//
// Counts are exact: `count` pairs, ``changed` pairs whose values differ (a NaN against a NaN is unchanged;
// a NaN against a number, or +0 against -0, is not: -0 == +0 is unchanged, as numpy's a != b says),
// `nonfinite` pairs where a or b is NaN or infinite (left out of every sum and extreme). max |Δ|, min Δ and
// max Δ are exact. The five sums (Σ Δ, Σ Δ², Σ a², Σ b², Σ a·b over finite pairs) are Neumaier-compensated float64
// sums: a sum and its running compensation, merged pair by pair, so a tile at any level agrees with a
// correctly rounded sum of its elements to a few units of float64 rounding.
// hist counts the finite Δ of the tile in bins shared by the whole tensor pair (DiffPyramid::edges). Level-0 tiles
// come from the placed op diff.tile_stats, whose contract (op_contracts.h: TM_OP_DIFF_TILE_STATS) fixes their arithmetic.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tensormorph/op_contracts.h"

namespace tmorph {

// A compensated float64 sum (Neumaier's variant of Kahan's): value() = sum + compensation.
struct CompensatedSum {
  double sum = 0, compensation = 0;
  void add(double x) {
    const double t = sum + x;
    compensation += (std::fabs(sum) >= std::fabs(x)) ? (sum - t) + x : (x - t) + sum;
    sum = t;
  }
  void merge(const CompensatedSum& o) {
    add(o.sum);
    compensation += o.compensation;
  }
  double value() const { return sum + compensation; }
};

struct DiffTileStats {
  uint64_t count = 0, changed = 0, nonfinite = 0;
  double max_abs = 0;                                  // max |Δ| over finite pairs
  double min_delta = std::numeric_limits<double>::infinity();   // the extremes of Δ over finite pairs
  double max_delta = -std::numeric_limits<double>::infinity();  // (+inf / -inf when there are none)
  CompensatedSum sum_delta, sum_sq_delta, sum_sq_a, sum_sq_b, sum_ab;
  std::vector<uint64_t> hist;                          // finite Δ per shared bin

  uint64_t finite() const { return count - nonfinite; }
  // ||Δ|| / ||a|| (Frobenius, finite pairs): 0 when nothing changed, NaN when a is all zeros and Δ is not.
  double rel_change() const;
  // a · b / (||a|| ||b||): NaN when either is all zeros.
  double cosine() const;
};

// A level-0 tile as the kernel of diff.tile_stats (op_contracts.h) leaves it, without its histogram (the pyramid
// groups the kernel's buckets into the tensor pair's shared bins).
DiffTileStats from_kernel_tile(const tm_diff_tile_v1& k);

// Adds o into t. Histograms must have the same bins (or o's be empty).
void merge_into(DiffTileStats& t, const DiffTileStats& o);

// Fixed little-endian record: 3 x u64 counts, 13 x f64 (max |Δ|, min Δ, max Δ, five sums with their compensations),
// then hist.size() x u64.
std::vector<uint8_t> encode_diff_tile(const DiffTileStats& t);
// Throws Error(BadInput) naming `where` when the record's size does not match `bins` or its counts
// contradict each other.
DiffTileStats decode_diff_tile(const uint8_t* data, size_t bytes, size_t bins, const std::string& where);

}  // namespace tmorph
