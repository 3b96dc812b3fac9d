// Exact statistics of one dense tensor, every op placed by the planner and reported.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tensormorph/dtype.h"
#include "tensormorph/placement.h"

namespace tmorph {

class Planner;
class ResidentCopy;

struct StatsOptions {
  unsigned threads = 0;  // 0: every core
  bool histogram = true;
  uint32_t bins = 256;
  // Histogram range [lo, hi]; unset: the finite min and max (numpy widens min == max by ±0.5).
  std::optional<std::pair<double, double>> histogram_range;
  // Explicit edges (bins + 1, strictly increasing, finite); when set, bins and range are ignored.
  std::vector<double> histogram_edges;
  bool quantiles = true;
  std::vector<double> probabilities = {0.001, 0.01, 0.5, 0.99, 0.999};
  std::set<std::string> allowed_approx_steps;  // --allow-approx
  uint64_t memory_budget_bytes = 0;            // 0: unlimited
};

struct MomentsSummary {
  uint64_t count = 0, finite_count = 0, nan_count = 0, inf_count = 0, zero_count = 0;
  double min = 0, max = 0, abs_max = 0, sum = 0, mean = 0, std = 0;
  bool is_integer = false;
  std::string int_min, int_max, int_sum;  // exact decimal strings for integer dtypes
};

struct Histogram {
  std::vector<double> edges;     // bins + 1
  std::vector<uint64_t> counts;  // bins
  uint64_t below = 0, above = 0; // finite values outside the edges
};

struct QuantileValue {
  double p = 0;
  double value = 0, lo = 0, hi = 0;  // lo == hi == value when exact
  uint64_t sample_size = 0;
};

struct StatsResult {
  MomentsSummary moments;
  std::optional<Histogram> histogram;
  std::vector<QuantileValue> quantiles;
  std::string quantile_method;  // "bitpattern_histogram", "radix_select", or the consented approx step
  bool quantiles_exact = true;
  std::vector<Placement> placement;
};

// Statistics of a tensor fed in pieces of any size (indexing reads data in I/O-sized windows). For
// 8- and 16-bit dtypes everything comes from the one pass: moments plus the count of every bit pattern,
// from which the histogram and exact quantiles follow. Wider dtypes need the histogram range (the
// moments' min and max) before binning and a selection over all values, so finish() makes those passes
// over the whole tensor, which must then be addressable (a memory map is enough).
class StatsStream {
 public:
  StatsStream(const Planner& planner, DType dtype, uint64_t total_elements, const StatsOptions& options);
  ~StatsStream();
  StatsStream(const StatsStream&) = delete;
  StatsStream& operator=(const StatsStream&) = delete;
  void feed(const void* data, uint64_t elements);
  // True when finish() reads the whole tensor again (dtypes wider than 16 bits with a histogram or
  // quantiles requested).
  bool needs_second_pass() const;
  // whole_tensor: the tensor's first element; may be null when needs_second_pass() is false.
  StatsResult finish(const void* whole_tensor);

  // 8- and 16-bit dtypes whose bit-pattern counts the planner placed on the CPU backend: the caller
  // may count them instead (indexing's pyramid pass counts every element's pattern while it tiles
  // them, lod/pattern_tiles.h). Once this returned true (call it before the first feed), feed() counts
  // no patterns and finish() needs add_pattern_counts() with the counts of every element fed; the
  // placement report gives `reason`. Returns false, changing nothing, when no counts are wanted or
  // they are placed on another backend.
  bool count_patterns_elsewhere(const std::string& reason);
  // counts: one per raw bit pattern (256 or 65,536), every element fed counted once.
  void add_pattern_counts(const std::vector<uint64_t>& counts);

 private:
  struct State;
  State* state_;
};

// Computes every requested statistic of `elements` elements of dtype at data (host memory).
// Throws tmorph::Error (Unavailable, PrecisionRefused, Internal) with a message naming the op and reason.
StatsResult compute_stats(const void* data, DType dtype, uint64_t elements, const Planner& planner,
                          const StatsOptions& options);

// Feeds a tensor in chunks of any size and produces the same moments as one call over the whole
// tensor (canonical blocks, fixed merge tree). Used by indexing, which reads data in I/O-sized pieces.
class MomentsStream {
 public:
  MomentsStream(const Planner& planner, DType dtype, uint64_t total_elements, unsigned threads);
  ~MomentsStream();
  MomentsStream(const MomentsStream&) = delete;
  MomentsStream& operator=(const MomentsStream&) = delete;
  void feed(const void* data, uint64_t elements);
  // The same, reading `resident` (a device copy of this data) when it serves the placed device.
  void feed(const void* data, uint64_t elements, const ResidentCopy* resident);
  MomentsSummary finish();
  const Placement& placement() const;

 private:
  struct State;
  State* state_;
};

}  // namespace tmorph
