// One JSON shape for a device of a registered backend, shared by `tensormorph backends --json` and the
// viewer's GET /api/compute: index, name, id, kind, software_adapter, memory_bytes, max_allocation_bytes,
// max_buffer_binding_bytes, features (a list of names) and host_link_bytes_per_s.
#pragma once

#include <nlohmann/json.hpp>

#include "tensormorph/backend_registry.h"

namespace tmorph {

nlohmann::json device_json(const DeviceInfo& d);

}  // namespace tmorph
