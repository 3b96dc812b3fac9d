// Errors inside the Vulkan backend: C++ exceptions that carry the tm_status the ABI boundary returns.
// Nothing throws across the plugin ABI; vulkan_backend.cpp converts.
#pragma once

#include <stdexcept>
#include <string>

#include "tensormorph/plugin_abi.h"
#include "vk_api.h"

namespace tmorph::vk {

class VkError : public std::runtime_error {
 public:
  VkError(tm_status status, const std::string& what) : std::runtime_error(what), status_(status) {}
  tm_status status() const { return status_; }

 private:
  tm_status status_;
};

// "VK_ERROR_OUT_OF_DEVICE_MEMORY" and the like.
const char* result_name(VkResult r);

// Throws VkError naming `call` unless r is VK_SUCCESS (out-of-memory results map to
// TM_ERR_OUT_OF_MEMORY, the rest to TM_ERR_DEVICE).
void check(VkResult r, const char* call);

}  // namespace tmorph::vk
