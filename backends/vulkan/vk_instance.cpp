#include "vk_instance.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <set>

namespace tmorph::vk {

namespace {

tm_device_kind kind_of(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return TM_DEVICE_SOFTWARE_ADAPTER;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return TM_DEVICE_INTEGRATED_GPU;
    default: return TM_DEVICE_GPU;  // discrete, virtual, other
  }
}

PhysicalDevice describe(VkPhysicalDevice handle) {
  const Api& a = api();
  PhysicalDevice d;
  d.handle = handle;
  VkPhysicalDeviceMaintenance3Properties m3{};
  m3.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES;
  VkPhysicalDeviceProperties2 props{};
  props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2;
  props.pNext = &m3;
  a.vkGetPhysicalDeviceProperties2(handle, &props);
  const VkPhysicalDeviceProperties& p = props.properties;
  d.name = p.deviceName;
  char id[96];
  std::snprintf(id, sizeof id, "vulkan:%x:%x:%x", p.vendorID, p.deviceID, p.driverVersion);
  char driver[16];
  std::snprintf(driver, sizeof driver, "%x", p.driverVersion);
  d.driver_version = driver;
  d.id = id;
  d.kind = kind_of(p.deviceType);
  d.api_version = p.apiVersion;
  d.max_allocation_bytes = m3.maxMemoryAllocationSize;
  d.max_storage_buffer_range = p.limits.maxStorageBufferRange;
  d.max_workgroup_count_x = p.limits.maxComputeWorkGroupCount[0];
  d.max_shared_memory_bytes = p.limits.maxComputeSharedMemorySize;

  VkPhysicalDeviceFeatures f{};
  a.vkGetPhysicalDeviceFeatures(handle, &f);
  if (f.shaderFloat64) d.features |= TM_FEATURE_F64;
  if (f.shaderInt64) d.features |= TM_FEATURE_INT64;

  VkPhysicalDeviceMemoryProperties mem{};
  a.vkGetPhysicalDeviceMemoryProperties(handle, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i)
    if (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) d.device_local_bytes += mem.memoryHeaps[i].size;
  const VkMemoryPropertyFlags uma = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                    VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  for (uint32_t i = 0; i < mem.memoryTypeCount; ++i)
    if ((mem.memoryTypes[i].propertyFlags & uma) == uma) d.host_visible_device_memory = true;
  // TENSORMORPH_VULKAN_DISCRETE_MEMORY=1 makes any device move data as a discrete GPU must (staging
  // uploads, readback copies), so that path is tested on a software adapter too.
  if (const char* env = std::getenv("TENSORMORPH_VULKAN_DISCRETE_MEMORY"); env && std::string(env) == "1")
    d.host_visible_device_memory = false;

  uint32_t families = 0;
  a.vkGetPhysicalDeviceQueueFamilyProperties(handle, &families, nullptr);
  std::vector<VkQueueFamilyProperties> qf(families);
  a.vkGetPhysicalDeviceQueueFamilyProperties(handle, &families, qf.data());
  for (uint32_t i = 0; i < families; ++i)
    if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      d.compute_queue_family = static_cast<int>(i);
      break;
    }
  // A device that cannot run our kernels (no compute queue, Vulkan 1.0) is listed without features,
  // so the planner rejects it with the reason rather than the backend hiding it.
  if (d.compute_queue_family < 0 || d.api_version < VK_API_VERSION_1_1) d.features = 0;
  return d;
}

// The shared objects loaded in this process, by path.
std::set<std::string> loaded_objects() {
  std::set<std::string> names;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && *info->dlpi_name) static_cast<std::set<std::string>*>(out)->insert(info->dlpi_name);
        return 0;
      },
      &names);
  return names;
}

// Keeps the objects loaded since `before` (the driver the loader opened, and what it pulled in, e.g.
// LLVM for lavapipe) loaded for the rest of the process, although the loader closes them when the
// instance is destroyed: opening a driver again costs its initialisation again (lavapipe: ~0.1 s of
// LLVM), and lavapipe keeps a global allocation that closing it strands (LeakSanitizer reports it).
void keep_loaded_since(const std::set<std::string>& before) {
  for (const std::string& name : loaded_objects())
    if (!before.count(name)) dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);  // never closed
}

}  // namespace

std::unique_ptr<Instance> Instance::create(tm_unavailable_reason* reason, std::string* why) {
  if (!load_loader(why)) {
    *reason = TM_REASON_MISSING_DEPENDENCY;
    return nullptr;
  }
  const Api& a = api();
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (a.vkEnumerateInstanceVersion) a.vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_1) {
    *reason = TM_REASON_DRIVER_TOO_OLD;
    *why = "the Vulkan loader supports only Vulkan 1.0; the backend needs 1.1";
    return nullptr;
  }
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "tensormorph";
  app.pEngineName = "tensormorph";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  std::unique_ptr<Instance> self(new Instance());
  const std::set<std::string> before = loaded_objects();
  const VkResult r = a.vkCreateInstance(&info, nullptr, &self->instance_);
  if (r != VK_SUCCESS) {
    self->instance_ = VK_NULL_HANDLE;
    *reason = TM_REASON_NO_DRIVER;
    *why = r == VK_ERROR_INCOMPATIBLE_DRIVER
               ? "no Vulkan driver (ICD) is installed (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER); on Debian "
                 "mesa-vulkan-drivers provides the lavapipe software device"
               : std::string("vkCreateInstance failed: ") + std::to_string(static_cast<int>(r));
    return nullptr;
  }
  if (!load_instance_functions(self->instance_, why)) {
    *reason = TM_REASON_DRIVER_TOO_OLD;
    return nullptr;
  }
  uint32_t count = 0;
  a.vkEnumeratePhysicalDevices(self->instance_, &count, nullptr);
  std::vector<VkPhysicalDevice> handles(count);
  if (count) a.vkEnumeratePhysicalDevices(self->instance_, &count, handles.data());
  for (uint32_t i = 0; i < count; ++i) self->devices_.push_back(describe(handles[i]));
  keep_loaded_since(before);  // the drivers are open now
  if (self->devices_.empty()) {
    *reason = TM_REASON_NO_DEVICE;
    *why = "the Vulkan driver reports no physical device";
    return nullptr;
  }
  return self;
}

Instance::~Instance() {
  if (instance_ != VK_NULL_HANDLE && api().vkDestroyInstance) api().vkDestroyInstance(instance_, nullptr);
}

}  // namespace tmorph::vk
