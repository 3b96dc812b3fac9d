// JSON shapes of the catalog endpoints that only the server has: a tensor's identity (with its served
// checkpoint's id), the quantization facts its checkpoint states, and its pyramid's description. The
// statistics themselves are app/result_json.h's documents, the same as `tensormorph stats --json`.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "index/checkpoint_index.h"
#include "server/server_state.h"

namespace tmorph::server {

// The dtype its values are summarised in: the dense dtype, "f32" for a dequantized (GGUF block or
// packed) tensor, else the stored type.
std::string tensor_dtype(const CheckpointTensor& t);

// checkpoint, name, stored_type, dtype, shape (row-major), parameters, bytes, file (its name, no folder),
// offset (bytes into the file) (and dequantized_from).
nlohmann::json tensor_identity(const ServedCheckpoint& sc, const CheckpointTensor& t);

// levels (each with its tile grid and the elements one tile covers), tile size, view, histogram
// edges of the tile records, and the byte size of one tile record.
nlohmann::json pyramid_json(const CheckpointIndex::PyramidInfo& info);

}  // namespace tmorph::server
