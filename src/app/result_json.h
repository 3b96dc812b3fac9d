// The result documents of tensormorph's operations, one encoder for every face (the CLI's --json, the
// HTTP API, later the Python module): the same statistics are the same JSON wherever they are asked for.
// Floating-point numbers follow core/json_number.h (non-finite ones are "nan", "inf", "-inf"); counts
// are JSON integers; exact integer moments are decimal strings. Keys are stable snake_case.
//
// Placements (where each op ran, with the rejected candidates) are encoded by ops/placement_json.h,
// which the checkpoint index also uses to store them; the documents below embed that encoding.
#pragma once

#include <nlohmann/json.hpp>

#include "checkpoint/compare.h"
#include "diff/diff_tile.h"
#include "ops/dequantize.h"
#include "ops/placement_json.h"
#include "tensormorph/stats.h"

namespace tmorph::app {

// count, finite_count, nan_count, inf_count, zero_count, min, max, abs_max, sum, mean, std, and for
// integer dtypes exact {min, max, sum} (decimal strings).
nlohmann::json moments_json(const MomentsSummary& m);

// moments_json plus histogram {edges, counts, below, above} and quantiles {method, exact, values: [{p,
// value, sample_size (, lo, hi when not exact)}]}, each when computed.
nlohmann::json stats_json(const StatsResult& r);

// `stats --quantization`: bits_per_weight, block_scales and block_mins (stats_json, or null), code_bits,
// code_counts (null when this format's codes are not counted), saturated_fraction (when counted),
// placement.
nlohmann::json quantization_stats_json(const QuantizationStats& q);

// One tensor pair's comparison figures: count, nonfinite, rmse, max_abs_diff, rel_error, cosine,
// snr_db, placement (the caller adds what names the pair).
nlohmann::json compare_json(const TensorDiff& d);

// One tile's (or a whole pair's) difference statistics (diff/diff_tile.h): count, changed, changed_fraction,
// nonfinite, sum_delta, sum_sq_delta, mean_delta, max_abs_delta, min_delta, max_delta (finite pairs; "inf" /
// "-inf" when none), rel_change (||Δ|| / ||a||), cosine, and histogram {edges, counts} when `edges` is given
// (the pyramid's shared bins; counts only when edges is non-empty).
nlohmann::json diff_stats_json(const DiffTileStats& t, const std::vector<double>* edges = nullptr);

}  // namespace tmorph::app
