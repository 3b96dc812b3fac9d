// The document `tensormorph compare A B --json` prints and tm.compare(a, b) returns: checkpoint B measured
// against reference A, tensor by tensor.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensormorph/planner.h"

namespace tmorph::app {

// {a, b, tensors: [{name, type_a, type_b, shape, count, nonfinite, rmse, max_abs_diff, rel_error, cosine,
// snr_db, placement}] in A's order, only_in_a, only_in_b (when `tensors` is empty), skipped: [{name, reason}]
// (shapes that differ)}. `tensors` limits it to those names (each must be in both: Error(InvalidArgument)
// otherwise); on_row, when set, sees each row as soon as it is measured (the CLI's table streams); around_pair, when
// set, is called with a pair's positions in A and B before it is measured (fetch = true) and after (remote sides:
// app/remote_checkpoint.h's RemotePair).
nlohmann::json compare_document(const std::string& a, const std::string& b, const std::vector<std::string>& tensors,
                                const Planner& planner, unsigned threads,
                                const std::function<void(const nlohmann::json& row)>& on_row = {},
                                const std::function<void(size_t tensor_a, size_t tensor_b, bool fetch)>& around_pair = {});

}  // namespace tmorph::app
