// What a statistics request's options mean, shared by every way of computing them (stats.cpp over
// host data, streamed_stats.cpp over decoded pieces).
#pragma once

#include <cstdint>
#include <vector>

#include "tensormorph/stats.h"

namespace tmorph {

// Probabilities per request (kernels size their workspace from it).
inline constexpr size_t kMaxProbabilities = 16;

// Uniform edges the way numpy.histogram builds them: linspace(lo, hi, bins + 1), last edge = hi.
std::vector<double> uniform_edges(double lo, double hi, uint32_t bins);

// The histogram's edges from the options (explicit, or uniform over a range or the finite min..max).
// Throws InvalidArgument for edges that are not finite and increasing, or a range that is not finite.
std::vector<double> histogram_edges(const StatsOptions& options, const MomentsSummary& m);

// Throws InvalidArgument for bins outside 1..65536 or more than kMaxProbabilities probabilities.
void check_options(const StatsOptions& options);

}  // namespace tmorph
