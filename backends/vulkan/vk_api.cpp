#include "vk_api.h"

#include <dlfcn.h>

namespace tmorph::vk {

namespace {
void* g_loader = nullptr;
}

Api& api() {
  static Api table;
  return table;
}

bool load_loader(std::string* why) {
  if (g_loader) return true;
  g_loader = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!g_loader) {
    const char* err = dlerror();
    *why = std::string("the Vulkan loader libvulkan.so.1 is not installed (Debian: libvulkan1): ") + (err ? err : "");
    return false;
  }
  Api& a = api();
  a.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(g_loader, "vkGetInstanceProcAddr"));
  if (!a.vkGetInstanceProcAddr) {
    *why = "libvulkan.so.1 has no vkGetInstanceProcAddr: not a Vulkan loader";
    unload_loader();
    return false;
  }
  a.vkCreateInstance = reinterpret_cast<PFN_vkCreateInstance>(a.vkGetInstanceProcAddr(nullptr, "vkCreateInstance"));
  a.vkEnumerateInstanceVersion =
      reinterpret_cast<PFN_vkEnumerateInstanceVersion>(a.vkGetInstanceProcAddr(nullptr, "vkEnumerateInstanceVersion"));
  if (!a.vkCreateInstance) {
    *why = "the Vulkan loader does not provide vkCreateInstance";
    unload_loader();
    return false;
  }
  return true;
}

bool load_instance_functions(VkInstance instance, std::string* why) {
  Api& a = api();
#define TM_VK_LOAD(name)                                                                       \
  a.name = reinterpret_cast<PFN_##name>(a.vkGetInstanceProcAddr(instance, #name));            \
  if (!a.name) {                                                                               \
    *why = "the Vulkan driver does not provide " #name;                                        \
    return false;                                                                              \
  }
  TM_VK_INSTANCE_FUNCTIONS(TM_VK_LOAD)
#undef TM_VK_LOAD
  return true;
}

void unload_loader() {
  if (g_loader) dlclose(g_loader);
  g_loader = nullptr;
  api() = Api{};
}

}  // namespace tmorph::vk
