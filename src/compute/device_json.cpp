#include "compute/device_json.h"

#include "tensormorph/settings.h"

namespace tmorph {

nlohmann::json device_json(const DeviceInfo& d) {
  return {{"index", d.index},
          {"name", d.name},
          {"id", d.id},
          {"kind", device_kind_name(d.kind)},
          {"software_adapter", d.kind == TM_DEVICE_SOFTWARE_ADAPTER},
          {"memory_bytes", d.memory_bytes},
          {"max_allocation_bytes", d.max_allocation_bytes},
          {"max_buffer_binding_bytes", d.max_buffer_binding_bytes},
          {"features", split_list(feature_names(d.features))},
          {"host_link_bytes_per_s", d.host_link_bytes_per_s}};
}

}  // namespace tmorph
