// The backend registry: every backend, static or plugin, enters through its tm_backend_v1 table.
// Core knows no backend by name; it asks each table what it is, what it has and what it can do.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tensormorph/plugin_abi.h"
#include "tensormorph/self_test.h"

namespace tmorph {

struct DeviceInfo {
  uint32_t index = 0;
  tm_device_kind kind = TM_DEVICE_CPU;
  std::string name;
  std::string id;
  uint64_t memory_bytes = 0;
  uint64_t max_allocation_bytes = 0;
  uint64_t max_buffer_binding_bytes = 0;
  uint64_t features = 0;
  double host_link_bytes_per_s = 0;  // 0: works on host memory directly
  std::string driver_version;        // as the plugin reports it (empty when it does not)
};

struct KernelInfo {
  uint32_t index = 0;
  tm_op op = TM_OP_INVALID;
  uint64_t dtype_mask = 0;
  uint64_t max_elements = 0;
  uint64_t required_features = 0;
  tm_precision_class precision = TM_PRECISION_EXACT;
  double tolerance = 0;
  uint64_t workspace_fixed_bytes = 0;
  double workspace_bytes_per_element = 0;
  std::string approx_step;         // empty for exact kernels
  std::string approx_description;
};

struct Backend {
  std::string name;
  std::string description;
  std::string origin;              // "static" or the plugin file it was loaded from
  bool available = false;
  std::string unavailable_reason;  // reason code, e.g. "no_device" (empty when available)
  std::string unavailable_detail;  // the backend's own message
  std::vector<DeviceInfo> devices;
  std::vector<KernelInfo> kernels;
  const tm_backend_v1* table = nullptr;  // null when the plugin could not be loaded at all
  bool can_upload = false;               // the table has the residency extension (upload, release)
  bool can_allocate = false;             // and the device-output extension (allocate; decoded frames stay there)
};

// A plugin file that was found but could not become a backend (bad symbol, ABI mismatch, dlopen error).
struct PluginLoadFailure {
  std::string path;
  std::string reason;  // "missing_dependency", "incompatible_abi", "not_a_plugin"
  std::string detail;
};

class BackendRegistry {
 public:
  BackendRegistry() = default;
  ~BackendRegistry();
  BackendRegistry(const BackendRegistry&) = delete;
  BackendRegistry& operator=(const BackendRegistry&) = delete;

  // Registers a backend table (the static CPU backend uses this). origin names where it came from.
  // A second backend with the same name is recorded as a load failure, never silently replaced.
  void register_table(const tm_backend_v1* table, const std::string& origin);
  // Loads every "libtensormorph-backend-*.so" in dir. A missing dir is not an error (nothing found).
  void load_plugins_from(const std::string& dir);
  // Disables a backend by policy (compute.never): it stays listed with reason disabled_by_policy.
  void disable(const std::string& name);

  // Plugins open lazily: registration reads a plugin's table (name, description); opening it calls its init
  // and lists its devices and kernels. A Vulkan ICD such as lavapipe costs about 0.1 s to open, most of a
  // short command's start, so the planner opens a plugin only for an input of kOpenPluginsAtBytes or more or
  // when the user names it (placement.h); `backends`, calibration and the server open every one.
  //
  // Every backend, each opened first (once; concurrent callers wait for it).
  const std::vector<Backend>& backends() const;
  // Every backend as registered, opening none: an entry whose is_open(i) is false has only its name,
  // description, origin and table (and a policy's unavailable reason). Safe while another thread opens one.
  const std::vector<Backend>& listed() const { return backends_; }
  bool is_open(size_t i) const { return openings_[i]->done.load(std::memory_order_acquire); }
  void open(size_t i) const;
  const std::vector<PluginLoadFailure>& load_failures() const { return failures_; }
  const std::vector<std::string>& searched_dirs() const { return searched_; }
  const Backend* find(const std::string& name) const;  // opened; null when none has that name
  // Kernel self-test admission (self_test.h): the planner asks before a plugin kernel serves a call.
  const SelfTests& self_tests() const { return self_tests_; }
  // Where verdicts persist across processes (SelfTests::set_cache_file); the runtime sets it.
  void set_self_test_cache_file(const std::string& path) { self_tests_.set_cache_file(path); }

 private:
  struct Opening {
    std::once_flag once;
    std::atomic<bool> done{false};
  };
  void open_now(Backend& b) const;  // init, devices, kernels; under the backend's once_flag

  mutable std::vector<Backend> backends_;             // entries are filled in when they open
  std::vector<std::unique_ptr<Opening>> openings_;  // one per backend, same order
  std::vector<PluginLoadFailure> failures_;
  std::vector<std::string> searched_;
  std::vector<void*> handles_;
  SelfTests self_tests_;
};

// Names of ABI enums as used in reports and JSON.
std::string op_name(tm_op op);
tm_op parse_op(const std::string& name);  // TM_OP_INVALID if unknown
std::string device_kind_name(tm_device_kind kind);
std::string unavailable_reason_name(tm_unavailable_reason reason);
std::string precision_name(tm_precision_class precision, double tolerance);  // "bounded(1e-06)"
std::string feature_names(uint64_t features);                                 // "f64,f16"

}  // namespace tmorph
