// The WebGPU adapter the viewer's page last reported. WebGPU kernels run in the browser, not in this process: the
// page reports what its navigator.gpu gave it (PUT /api/compute/webgpu), the server keeps the last report in the
// user's cache folder, and `tensormorph backends` names it.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tmorph {

// $XDG_CACHE_HOME/tensormorph/webgpu-adapter.json (default ~/.cache/tensormorph/).
std::string page_adapter_path();

// The page's report checked field by field: `available`, `fallback`, `software` booleans; `name`, `vendor`,
// `architecture`, `device`, `description`, `reason` strings of at most 256 bytes; nothing else. Throws
// Error(InvalidArgument) naming the field and what was expected. Returns the report as it will be kept.
nlohmann::json validated_page_adapter(const nlohmann::json& report);

// Keeps a validated report with `reported_at` (UTC, ISO 8601) beside it, replacing the file atomically.
nlohmann::json save_page_adapter(const nlohmann::json& validated);

// The last kept report; nullopt when no page has reported one. A file that is not a valid record (damaged,
// edited) throws Error(BadInput) naming the file and what is wrong.
std::optional<nlohmann::json> load_page_adapter();

// One line for people: "SwiftShader (software adapter), reported 2026-12-06T11:40:02Z", "none available in the
// page (navigator.gpu is absent …), reported …", or "none seen (no page has reported an adapter; open the viewer:
// tensormorph serve)".
std::string page_adapter_text(const std::optional<nlohmann::json>& report);

}  // namespace tmorph
