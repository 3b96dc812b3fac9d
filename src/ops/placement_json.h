// Placements as JSON, for --json reports and for the checkpoint index, which stores where each
// statistic was computed. Keys are stable snake_case; the fields for running a kernel are not kept.
// estimated_seconds follows core/json_number.h (a non-finite estimate is "inf" or "nan").
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "tensormorph/placement.h"

namespace tmorph {

nlohmann::json placement_json(const Placement& p);
nlohmann::json placements_json(const std::vector<Placement>& ps);
// The reported fields back from placements_json (backend_ref stays null: a record, not a plan).
std::vector<Placement> placements_from_json(const nlohmann::json& j);

}  // namespace tmorph
