// The Vulkan entry points the backend uses, loaded at run time from the Vulkan loader
// (libvulkan.so.1). Loading it ourselves, rather than linking it, lets a machine without Vulkan see
// the backend listed as unavailable with its reason instead of a plugin that fails to load.
#pragma once

#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <string>

namespace tmorph::vk {

#define TM_VK_INSTANCE_FUNCTIONS(X)                                                                     \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)                  \
  X(vkGetPhysicalDeviceProperties2) X(vkGetPhysicalDeviceFeatures) X(vkGetPhysicalDeviceMemoryProperties) \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkCreateDevice) X(vkDestroyDevice) X(vkGetDeviceQueue)  \
  X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements) X(vkAllocateMemory)              \
  X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory) X(vkUnmapMemory) X(vkCreateShaderModule)          \
  X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout)                \
  X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) X(vkDestroyPipeline)  \
  X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkAllocateDescriptorSets)                       \
  X(vkUpdateDescriptorSets) X(vkCreateCommandPool) X(vkDestroyCommandPool) X(vkAllocateCommandBuffers)    \
  X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkResetCommandBuffer) X(vkCmdBindPipeline)             \
  X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCmdFillBuffer) X(vkCmdCopyBuffer) \
  X(vkCmdPipelineBarrier) X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences)         \
  X(vkResetFences)

struct Api {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr = nullptr;
  PFN_vkCreateInstance vkCreateInstance = nullptr;
  PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion = nullptr;
#define TM_VK_DECLARE(name) PFN_##name name = nullptr;
  TM_VK_INSTANCE_FUNCTIONS(TM_VK_DECLARE)
#undef TM_VK_DECLARE
};

// The process-wide table (filled by load_loader and load_instance_functions).
Api& api();

// Opens the Vulkan loader and resolves the global entry points. False (with *why) when the loader is
// not installed or is not a Vulkan loader.
bool load_loader(std::string* why);
// Resolves every instance-level and device-level entry point through vkGetInstanceProcAddr. False
// (with *why naming the first missing one) when the driver lacks any.
bool load_instance_functions(VkInstance instance, std::string* why);
// Closes the loader (after the instance is destroyed).
void unload_loader();

}  // namespace tmorph::vk
