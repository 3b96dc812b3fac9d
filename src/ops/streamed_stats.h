// Exact statistics of float32 values that are produced piece by piece and can be produced again (a
// quantized tensor decoded a chunk at a time), in memory bounded by one piece: nothing the size of the
// tensor is ever held.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "tensormorph/placement.h"
#include "tensormorph/stats.h"

namespace tmorph {

class Planner;

// Calls sink(values, count) for consecutive pieces that together hold every value once, in order.
using FloatSink = std::function<void(const float* values, uint64_t count)>;
using FloatProducer = std::function<void(const FloatSink& sink)>;

// Moments computed without the values (e.g. quant.moments from codes and scales), with their placement.
struct KnownMoments {
  MomentsSummary summary;
  Placement placement;
};

// The statistics compute_stats gives for the same float32 values, bit for bit, from at most two passes
// of `produce`:
//  1. moments (canonical blocks, the placed stats.moments kernel) and, for quantiles, the count of the
//     top 16 bits of each finite value's order key;
//  2. only when a histogram or quantiles are wanted: the histogram over its final edges (the placed
//     stats.histogram kernel, counts added piece by piece) and the count of the low 16 bits of the values
//     in the few top buckets that hold the wanted order statistics, from which they follow exactly.
// The selection is counted on the host by the ops layer (quantile_method "streamed_bitpattern_select").
// `decode` (the placement that produces the values) heads the placement list when a pass ran.
// With `known` moments, those are reported instead (their placement first) and pass 1 runs only to
// count keys for quantiles: a moments-only request then decodes nothing.
StatsResult streamed_float_stats(uint64_t elements, const Placement& decode, const FloatProducer& produce,
                                 const Planner& planner, const StatsOptions& options,
                                 const std::optional<KnownMoments>& known = std::nullopt);

}  // namespace tmorph
