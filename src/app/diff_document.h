// The document `tensormorph diff A B --json` prints: what changed between two checkpoints and where, tensor by
// tensor (diff/checkpoint_diff.h), with rankings of tensors and layers by relative change and the per-layer strip.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "diff/checkpoint_diff.h"

namespace tmorph::app {

struct DiffDocumentOptions {
  size_t top = 10;                  // rows of each ranking
  std::optional<unsigned> level;    // include every tile of this pyramid level for each pair (the diff must have
                                    // been run with DiffOptions::keep_tiles)
};

// {a, b, adapter (null, or for a PEFT LoRA adapter B: {rank, alpha, scale, use_rslora, fan_in_fan_out,
// target_modules}), format_a, format_b, name_mapping, index {database, persisted, warning}, pairs: [{name, name_b, type_a,
// type_b, shape, layer, translated, rows ("stored" | "unpermuted"), qk_permutation {heads, sample_rows,
// sum_sq_delta_as_stored, sum_sq_delta_unpermuted, verdict} or {unchecked}, view, tile_rows, tile_cols, levels,
// difference (diff_stats_json with the histogram), reused, seconds, placement, tiles (with `level`: {level, rows,
// cols, tiles: [{slice, ty, tx, row_begin, row_end, col_begin, col_end, ...diff_stats_json}]})}] in A's order,
// ranking {tensors: [{name, layer, rel_change, changed_fraction}], layers: [{layer, rel_change, changed_fraction,
// tensors}]} (largest first, NaN last, `top` each), layer_strip [{layer, rel_change}] in layer order, only_in_a,
// only_in_b, skipped [{name, reason}]}. A layer's relative change is sqrt(Σ ΣΔ² / Σ Σa²) over its tensors.
nlohmann::json diff_document(const CheckpointDiff& d, const DiffDocumentOptions& options);

}  // namespace tmorph::app
