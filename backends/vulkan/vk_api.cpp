#include "vk_api.h"

#include <dlfcn.h>

#include <cstdlib>

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
  // TENSORMORPH_VULKAN_LOADER names another loader file (tests use it to simulate a missing loader).
  const char* env = std::getenv("TENSORMORPH_VULKAN_LOADER");
  const std::string file = env && *env ? env : "libvulkan.so.1";
  g_loader = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!g_loader) {
    const char* err = dlerror();
    why->assign("the Vulkan loader ").append(file).append(" is not installed (Debian: libvulkan1): ").append(err ? err : "");
    return false;
  }
  Api& a = api();
  a.vkGetInstanceProcAddr = reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(g_loader, "vkGetInstanceProcAddr"));
  if (!a.vkGetInstanceProcAddr) {
    why->assign(file).append(" has no vkGetInstanceProcAddr: not a Vulkan loader");
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
