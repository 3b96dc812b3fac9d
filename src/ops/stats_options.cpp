#include "ops/stats_options.h"

#include <cmath>
#include <string>

#include "tensormorph/error.h"

namespace tmorph {

std::vector<double> uniform_edges(double lo, double hi, uint32_t bins) {
  if (lo == hi) lo -= 0.5, hi += 0.5;
  std::vector<double> e(bins + 1);
  const double step = (hi - lo) / bins;
  for (uint32_t i = 0; i <= bins; ++i) e[i] = static_cast<double>(i) * step + lo;
  e[bins] = hi;
  return e;
}

std::vector<double> histogram_edges(const StatsOptions& options, const MomentsSummary& m) {
  if (!options.histogram_edges.empty()) {
    const auto& edges = options.histogram_edges;
    if (edges.size() < 2 || edges.size() > 65537)
      throw Error(ErrorKind::InvalidArgument, "histogram edges: need 2..65537 edges, got " + std::to_string(edges.size()));
    for (size_t i = 0; i < edges.size(); ++i)
      if (!std::isfinite(edges[i]) || (i && !(edges[i] > edges[i - 1])))
        throw Error(ErrorKind::InvalidArgument, "histogram edges: edge " + std::to_string(i) +
                                                    " must be finite and greater than the one before");
    return edges;
  }
  const auto [lo, hi] = options.histogram_range.value_or(std::make_pair(m.min, m.max));
  if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo <= hi))
    throw Error(ErrorKind::InvalidArgument, "histogram range must be finite with lo <= hi");
  return uniform_edges(lo, hi, options.bins);
}

void check_options(const StatsOptions& options) {
  if (options.histogram && options.histogram_edges.empty() && (options.bins == 0 || options.bins > 65536))
    throw Error(ErrorKind::InvalidArgument, "histogram bins must be 1..65536, got " + std::to_string(options.bins));
  if (options.quantiles && options.probabilities.size() > kMaxProbabilities)
    throw Error(ErrorKind::InvalidArgument, "at most " + std::to_string(kMaxProbabilities) +
                                                " quantile probabilities per request, got " +
                                                std::to_string(options.probabilities.size()));
}

}  // namespace tmorph
