// Rendering results for people (aligned tables) and programs (--json, stable snake_case keys).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/checkpoint_json.h"
#include "checkpoint/checkpoint.h"
#include "ops/placement_json.h"
#include "tensormorph/placement.h"

namespace tmorph::cli {

// Whether print_placements explains (set by --explain, ComputeFlags): false by default.
bool& explain_placement();

// By default one line: the backends that ran the ops (precision named when not exact) and whether anything
// fell back (a preferred backend without the kernel, a failed self-test, a consented approximation).
// With --explain: "placement:" and one line per op with its rejected candidates indented below.
void print_placements(const std::vector<Placement>& ps);

// `j` as the CLI writes JSON (stdout and sidecar files): two-space indent; bytes that are not UTF-8 (a
// name or string from a file we did not write) become U+FFFD instead of an exception.
std::string json_text(const nlohmann::json& j);

// Prints json_text(j) and a newline on stdout.
void print_json(const nlohmann::json& j);

// A double as a human reads it (%.6g, "nan", "inf").
std::string fmt(double v);

// A row-major shape as "[4096, 11008]".
std::string fmt_shape(const std::vector<uint64_t>& shape);

// A simple left-aligned two-column table.
void print_rows(const std::vector<std::pair<std::string, std::string>>& rows, int indent = 2);

// A packed tensor's descriptor for --json (app/checkpoint_json.h).
using app::packed_report;

}  // namespace tmorph::cli
