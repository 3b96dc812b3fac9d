// One JSON shape for the backends of the registry, shared by `tensormorph backends --json` and the viewer's
// GET /api/compute. In the application layer because it names the ggml block formats and packed schemes a
// format kernel takes, which compute does not know.
// - device_json: index, name, id, kind, software_adapter, memory_bytes, max_allocation_bytes,
//   max_buffer_binding_bytes, features (a list of names) and host_link_bytes_per_s.
// - kernel_json: op, dtypes (what kernel_inputs names), precision, max_elements, required_features,
//   workspace_fixed_bytes, workspace_bytes_per_element, approx_step (null when exact), approx_description.
// - backend_json: name, description, origin, available, reason (null when available), detail, devices,
//   kernels, parity_levels (capability -> level in the parity matrix); device_json also driver_version (null when the plugin does not report one).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensormorph/backend_registry.h"

namespace tmorph::app {

nlohmann::json device_json(const DeviceInfo& d);

// What a kernel takes: dtype names, or for format ops (op_contracts.h) the ggml block formats, packed
// schemes or SSB variants its mask holds.
std::vector<std::string> kernel_inputs(const KernelInfo& k);
nlohmann::json kernel_json(const KernelInfo& k);
nlohmann::json backend_json(const Backend& b);
// tests/parity/backend_matrix.json as built into this binary, parsed once: the one place every face reads the
// matrix from (its "backends" and "capabilities").
const nlohmann::json& parity_matrix();
// A backend's level for each capability of tests/parity/backend_matrix.json ({} when the matrix does not list
// it): "reference", "required", "compiled", ...
nlohmann::json parity_levels(const std::string& name);

// Runs the self-test of every kernel of every available plugin, on each of its devices, for every dtype or
// format it declares (ggml formats with their block layout), and returns every verdict of the registry.
std::vector<SelfTestVerdict> run_all_self_tests(const BackendRegistry& registry);

}  // namespace tmorph::app
