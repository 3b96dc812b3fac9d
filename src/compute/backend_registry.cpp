#include "tensormorph/backend_registry.h"

#include "compute/op_table.h"
#include "compute/resident_copy.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>

namespace tmorph {

namespace {

DeviceInfo to_device(uint32_t index, const tm_device_info_v1& d) {
  DeviceInfo out;
  out.index = index;
  out.kind = d.kind;
  out.name = d.name ? d.name : "";
  out.id = d.id ? d.id : out.name;
  out.memory_bytes = d.memory_bytes;
  out.max_allocation_bytes = d.max_allocation_bytes;
  out.max_buffer_binding_bytes = d.max_buffer_binding_bytes;
  out.features = d.features;
  out.host_link_bytes_per_s = d.host_link_bytes_per_s;
  // The driver-version extension: read only when the plugin's struct covers it.
  if (d.struct_size >= offsetof(tm_device_info_v1, driver_version) + sizeof d.driver_version && d.driver_version)
    out.driver_version = d.driver_version;
  return out;
}

KernelInfo to_kernel(uint32_t index, const tm_kernel_cap_v1& k) {
  KernelInfo out;
  out.index = index;
  out.op = k.op;
  out.dtype_mask = k.dtype_mask;
  out.max_elements = k.max_elements;
  out.required_features = k.required_features;
  out.precision = k.precision;
  out.tolerance = k.tolerance;
  out.workspace_fixed_bytes = k.workspace_fixed_bytes;
  out.workspace_bytes_per_element = k.workspace_bytes_per_element;
  out.approx_step = k.approx_step ? k.approx_step : "";
  out.approx_description = k.approx_description ? k.approx_description : "";
  return out;
}

}  // namespace

BackendRegistry::~BackendRegistry() {
  // Device copies that outlive the registry (a process-wide cache's) are let go before their backend shuts down
  // (which frees its device memory) and its library is unloaded: their destructors then call nothing.
  for (const Backend& b : backends_) ResidentCopy::forget_backend(&b);
  for (size_t i = 0; i < backends_.size(); ++i) {
    const Backend& b = backends_[i];
    if (is_open(i) && b.table && b.available && b.table->shutdown) b.table->shutdown();
  }
  for (void* h : handles_) dlclose(h);
}

void BackendRegistry::register_table(const tm_backend_v1* table, const std::string& origin) {
  // Tables built before the residency extension end at `run`; they are accepted without it.
  constexpr size_t kMinimumTable = offsetof(tm_backend_v1, upload);
  if (!table || table->abi_version != TM_PLUGIN_ABI_VERSION || table->struct_size < kMinimumTable) {
    failures_.push_back({origin, "incompatible_abi",
                         "backend table speaks ABI " + std::to_string(table ? table->abi_version : 0) +
                             ", core speaks " + std::to_string(TM_PLUGIN_ABI_VERSION)});
    return;
  }
  const std::string name = table->name ? table->name : "";
  if (name.empty() || find(name)) {
    failures_.push_back({origin, "not_a_plugin",
                         name.empty() ? "backend has no name" : "a backend named '" + name + "' is already registered"});
    return;
  }
  Backend b;
  b.name = name;
  b.description = table->description ? table->description : "";
  b.origin = origin;
  b.table = table;
  const auto covers = [&](size_t end) { return table->struct_size >= end; };
  b.can_upload = covers(offsetof(tm_backend_v1, release) + sizeof table->release) && table->upload && table->release;
  b.can_allocate = b.can_upload && covers(offsetof(tm_backend_v1, allocate) + sizeof table->allocate) && table->allocate;
  backends_.push_back(std::move(b));
  openings_.push_back(std::make_unique<Opening>());
  if (origin == "static") open(backends_.size() - 1);  // linked in: nothing to load, open now
}

const std::vector<Backend>& BackendRegistry::backends() const {
  for (size_t i = 0; i < backends_.size(); ++i) open(i);
  return backends_;
}

void BackendRegistry::open(size_t i) const {
  Opening& o = *openings_.at(i);
  std::call_once(o.once, [&] {
    open_now(backends_[i]);
    o.done.store(true, std::memory_order_release);
  });
}

void BackendRegistry::open_now(Backend& b) const {
  if (b.unavailable_reason == "disabled_by_policy") return;  // never opened: compute.never / --never named it
  const tm_backend_v1* table = b.table;
  tm_unavailable_reason reason = TM_AVAILABLE;
  tm_message msg{};
  const tm_status st = table->init ? table->init(&reason, &msg) : TM_ERR_INTERNAL;
  msg.text[sizeof msg.text - 1] = 0;
  if (st != TM_OK || reason != TM_AVAILABLE) {
    b.available = false;
    b.unavailable_reason = unavailable_reason_name(reason == TM_AVAILABLE ? TM_REASON_NO_DEVICE : reason);
    b.unavailable_detail = msg.text;
  } else {
    b.available = true;
    const uint32_t nd = table->device_count();
    for (uint32_t i = 0; i < nd; ++i) {
      tm_device_info_v1 d{};
      d.struct_size = sizeof d;
      if (table->device_info(i, &d) == TM_OK) b.devices.push_back(to_device(i, d));
    }
    const uint32_t nk = table->kernel_count();
    for (uint32_t i = 0; i < nk; ++i) {
      tm_kernel_cap_v1 k{};
      k.struct_size = sizeof k;
      if (table->kernel_info(i, &k) == TM_OK) b.kernels.push_back(to_kernel(i, k));
    }
    if (b.devices.empty()) {
      b.available = false;
      b.unavailable_reason = "no_device";
      b.unavailable_detail = "the backend initialised but reports no device";
    }
  }
}

void BackendRegistry::load_plugins_from(const std::string& dir) {
  searched_.push_back(dir);
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("libtensormorph-backend-", 0) == 0 && entry.path().extension() == ".so")
      files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());  // deterministic registration order
  for (const auto& path : files) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* err = dlerror();
      failures_.push_back({path, "missing_dependency", err ? err : "dlopen failed"});
      continue;
    }
    auto entry = reinterpret_cast<tm_plugin_entry_fn>(dlsym(handle, TM_PLUGIN_ENTRY_SYMBOL));
    if (!entry) {
      failures_.push_back({path, "not_a_plugin", std::string("no symbol ") + TM_PLUGIN_ENTRY_SYMBOL});
      dlclose(handle);
      continue;
    }
    const tm_backend_v1* table = entry(TM_PLUGIN_ABI_VERSION);
    if (!table) {
      failures_.push_back({path, "incompatible_abi",
                           "plugin refused ABI version " + std::to_string(TM_PLUGIN_ABI_VERSION)});
      dlclose(handle);
      continue;
    }
    handles_.push_back(handle);
    register_table(table, path);
  }
}

void BackendRegistry::disable(const std::string& name) {
  for (auto& b : backends_) {
    if (b.name != name) continue;
    b.available = false;
    b.unavailable_reason = "disabled_by_policy";
    b.unavailable_detail = "listed in compute.never or --never";
  }
}

const Backend* BackendRegistry::find(const std::string& name) const {
  for (size_t i = 0; i < backends_.size(); ++i)
    if (backends_[i].name == name) {
      open(i);
      return &backends_[i];
    }
  return nullptr;
}

std::string op_name(tm_op op) {
  const OpDescriptor* row = find_op(op);
  return row ? std::string(row->name) : "op#" + std::to_string(static_cast<int>(op));
}

tm_op parse_op(const std::string& name) {
  for (const OpDescriptor& row : op_table())
    if (row.name == name) return row.id;
  return TM_OP_INVALID;
}

std::string device_kind_name(tm_device_kind kind) {
  switch (kind) {
    case TM_DEVICE_CPU: return "cpu";
    case TM_DEVICE_GPU: return "gpu";
    case TM_DEVICE_SOFTWARE_ADAPTER: return "software_adapter";
    case TM_DEVICE_INTEGRATED_GPU: return "integrated_gpu";
  }
  return "unknown";
}

std::string unavailable_reason_name(tm_unavailable_reason reason) {
  switch (reason) {
    case TM_AVAILABLE: return "";
    case TM_REASON_NO_DRIVER: return "no_driver";
    case TM_REASON_NO_DEVICE: return "no_device";
    case TM_REASON_DRIVER_TOO_OLD: return "driver_too_old";
    case TM_REASON_MISSING_DEPENDENCY: return "missing_dependency";
    case TM_REASON_DISABLED_BY_POLICY: return "disabled_by_policy";
  }
  return "unknown";
}

std::string precision_name(tm_precision_class precision, double tolerance) {
  switch (precision) {
    case TM_PRECISION_EXACT: return "exact";
    case TM_PRECISION_DETERMINISTIC: return "deterministic";
    case TM_PRECISION_BOUNDED: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "bounded(%g)", tolerance);
      return buf;
    }
  }
  return "unknown";
}

std::string feature_names(uint64_t features) {
  std::string out;
  auto add = [&](uint64_t bit, const char* name) {
    if (features & bit) out += std::string(out.empty() ? "" : ",") + name;
  };
  add(TM_FEATURE_F64, "f64");
  add(TM_FEATURE_F16, "f16");
  add(TM_FEATURE_INT64_ATOMICS, "int64_atomics");
  add(TM_FEATURE_INT64, "int64");
  return out;
}

}  // namespace tmorph
