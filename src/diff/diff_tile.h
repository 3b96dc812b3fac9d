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
// hist counts the finite Δ of the tile in bins shared by the whole tensor pair (DiffPyramid::edges).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

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

// The histogram bucket of a finite Δ, its sign and binade (diff_pyramid.h says how buckets become bins): Δ >= 0
// with 2^k <= Δ < 2^(k+1) is 192 + k, Δ < 0 with 2^k <= |Δ| < 2^(k+1) is 63 - k, k in [-63, 63] (clamped above);
// |Δ| < 2^-63 is 128 (Δ >= 0, zero of either sign included) or 127. Read from the float64 exponent field:
// |Δ| in [2^k, 2^(k+1)) has biased exponent k + 1023, and every |Δ| < 2^-63 one below 960.
inline unsigned delta_bucket(double delta) {
  const uint64_t bits = std::bit_cast<uint64_t>(delta);
  const int biased = static_cast<int>((bits >> 52) & 0x7FF);
  if (biased < 1023 - 63) return delta < 0 ? 127 : 128;
  const int k = biased - 1023 < 63 ? biased - 1023 : 63;
  return static_cast<unsigned>((bits >> 63) ? 63 - k : 192 + k);
}

// Adds the pairs (a[i], b[i]), i < n, into t, and when `buckets` is given counts each finite pair's Δ in
// buckets[delta_bucket(Δ)] (256 counters; the tile's histogram is made from them when the pass ends).
void accumulate_pairs(DiffTileStats& t, const double* a, const double* b, uint64_t n, uint32_t* buckets = nullptr);

// Adds o into t. Histograms must have the same bins (or o's be empty).
void merge_into(DiffTileStats& t, const DiffTileStats& o);

// Fixed little-endian record: 3 x u64 counts, 13 x f64 (max |Δ|, min Δ, max Δ, five sums with their compensations),
// then hist.size() x u64.
std::vector<uint8_t> encode_diff_tile(const DiffTileStats& t);
// Throws Error(BadInput) naming `where` when the record's size does not match `bins` or its counts
// contradict each other.
DiffTileStats decode_diff_tile(const uint8_t* data, size_t bytes, size_t bins, const std::string& where);

}  // namespace tmorph
