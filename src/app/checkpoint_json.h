// The per-tensor parts of the checkpoint documents (`stats --json`, `ls --json`, the Python module's
// Checkpoint.stats()/.tensors), one encoder for every face. Statistics themselves are result_json.h's.
#pragma once

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "tensormorph/stats.h"

namespace tmorph::app {

// A packed tensor's descriptor: scheme, geometry and its parts, each with its file's path.
nlohmann::json packed_report(const Checkpoint& c, const PackedTensor& p);

// What the checkpoint says about how t is quantized, or null for a dense tensor: stored_type, bits_per_weight
// (stored bits over parameters, scales included), ggml_type for a GGUF block format, and packed (scheme, geometry,
// parts) for a packed scheme, each part's file by its name alone when `file_names_only` (what the server shows:
// never a path), else by its path.
nlohmann::json quantization_json(const Checkpoint& c, const CheckpointTensor& t, bool file_names_only);

// A strided view's element strides, one per dimension; null for a tensor stored in row-major order.
nlohmann::json strides_json(const CheckpointTensor& t);

// What names a tensor in a statistics entry: name, stored_type, shape, elements, bytes, offset (within
// its file), ne for GGUF tensors, strides (in elements) for a strided torch view, and chunks (how many)
// for a tensor stored in chunks (DCP).
nlohmann::json tensor_entry_json(const CheckpointTensor& t);

// A tensor as the listings show it (`ls --json`, Checkpoint.tensors): tensor_entry_json's fields, dtype
// (null unless dense), file (its path), readable, packed when packed, and unavailable (the reason) when
// not readable.
nlohmann::json tensor_listing_json(const Checkpoint& c, const CheckpointTensor& t);

// Adds a readable tensor's statistics to its entry: dtype (what was summarised: quantized and packed
// tensors as the float32 values they decode to), dequantized_from and packed when so, stats (stats_json),
// placement, and source ("index" when `from_index`, else "computed").
void add_tensor_stats_json(nlohmann::json& entry, const Checkpoint& c, const CheckpointTensor& t, const StatsResult& r,
                           bool from_index);

}  // namespace tmorph::app
