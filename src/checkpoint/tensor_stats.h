// Statistics of one checkpoint tensor, whatever its storage: dense dtypes are read in place, ggml
// block formats are dequantized (bit-identical to ggml), packed safetensors schemes decoded from their
// parts, and their float32 values summarised.
#pragma once

#include <optional>
#include <string>

#include "checkpoint/checkpoint.h"
#include "tensormorph/stats.h"

namespace tmorph {

class Planner;

// Why no backend here can read t's values (no dense dtype and no decoder for its format), or nullopt.
std::optional<std::string> unreadable_reason(const CheckpointTensor& t, const Planner& planner);

// Exact statistics of t's values. Throws Unavailable when unreadable_reason() says so.
StatsResult compute_tensor_stats(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner,
                                 const StatsOptions& options);

}  // namespace tmorph
