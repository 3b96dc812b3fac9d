// The Vulkan instance and what it says about every physical device. Limits and features are read
// from the device, never assumed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensormorph/plugin_abi.h"
#include "vk_api.h"

namespace tmorph::vk {

struct PhysicalDevice {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  std::string name;                 // as the driver reports it
  std::string id;                   // "vulkan:<vendor>:<device>:<driver version>", hex
  std::string driver_version;       // the driver's version number as it reports it, hex
  tm_device_kind kind = TM_DEVICE_GPU;
  uint32_t api_version = 0;
  uint64_t device_local_bytes = 0;  // sum of the DEVICE_LOCAL heaps
  uint64_t max_allocation_bytes = 0;  // maxMemoryAllocationSize
  uint64_t max_storage_buffer_range = 0;
  uint32_t max_workgroup_count_x = 0;
  uint32_t max_shared_memory_bytes = 0;
  uint64_t features = 0;            // TM_FEATURE_* the kernels can rely on
  int compute_queue_family = -1;    // -1: the device has no compute queue
  bool host_visible_device_memory = false;  // a DEVICE_LOCAL | HOST_VISIBLE | HOST_COHERENT type exists
};

class Instance {
 public:
  // Creates the instance (Vulkan 1.1) and enumerates devices. Returns null with *reason and *why set
  // when there is no loader, no driver, or no device.
  static std::unique_ptr<Instance> create(tm_unavailable_reason* reason, std::string* why);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return instance_; }
  const std::vector<PhysicalDevice>& devices() const { return devices_; }

 private:
  Instance() = default;
  VkInstance instance_ = VK_NULL_HANDLE;
  std::vector<PhysicalDevice> devices_;
};

}  // namespace tmorph::vk
