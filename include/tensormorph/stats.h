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
  void feed(const void* data, uint64_t elements);
  MomentsSummary finish();
  const Placement& placement() const;

 private:
  struct State;
  State* state_;
};

}  // namespace tmorph
