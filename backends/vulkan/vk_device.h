// One logical Vulkan device: its compute queue, the buffers the kernels reuse from call to call, the
// compute pipelines (built on first use) and synchronous submission.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vk_instance.h"

namespace tmorph::vk {

struct Buffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;  // host pointer for host-visible buffers, else null
  uint64_t size = 0;       // bytes
};

struct Pipeline {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  VkDescriptorSet set = VK_NULL_HANDLE;
  uint32_t bindings = 0;
  uint32_t push_bytes = 0;
};

// Where a buffer lives and who reads it. Input holds a chunk of the tensor in device memory; Staging
// carries it there when that memory is not host-visible. Output holds a launch's results in device
// memory; Readback carries them to the host when that memory is not host-visible. Aux is host-visible
// (edges, targets: small, read once by the shader). Scratch0 and Scratch1 are device memory that only
// shaders touch (intermediate planes between launches).
enum class Slot { Input, Staging, Output, Readback, Aux, Scratch0, Scratch1 };

// A buffer bound from a byte offset (a multiple of 65,536 or 0, so every device's alignment holds).
struct Binding {
  const Buffer* buffer = nullptr;
  uint64_t offset = 0;
};

// One kernel launch: pipeline, what is bound at each binding, push constants, workgroups. The
// launch first copies `upload_bytes` from Staging to Input (when the input went through staging) and
// zeroes `zero_first`; after it, `result_bytes` of Output are readable at Device::results().
struct Dispatch {
  const Pipeline* pipeline = nullptr;
  std::vector<Binding> bindings;
  const void* push = nullptr;
  uint32_t groups = 1;
  uint64_t upload_bytes = 0;
  std::vector<std::pair<const Buffer*, uint64_t>> zero_first;  // buffer, bytes (multiple of 4)
  uint64_t result_bytes = 0;
};

class Device {
 public:
  explicit Device(const PhysicalDevice& physical);  // throws VkError
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const PhysicalDevice& physical() const { return physical_; }

  // The slot's buffer, at least `bytes` large (grown, never shrunk; contents are not kept).
  Buffer& buffer(Slot slot, uint64_t bytes);
  // Writes `bytes` of host data to the start of the input (directly when the device memory is host
  // visible, else into staging) and zeroes up to the next multiple of 4. Returns the bytes a
  // Dispatch must copy from staging (0 when written directly).
  uint64_t write_input(const void* data, uint64_t bytes);

  // A device-local buffer holding a copy of host data (a resident tensor chunk), and its release.
  Buffer make_resident(const void* data, uint64_t bytes);
  void release(Buffer& b) { destroy_buffer(b); }

  // The compute pipeline of an embedded shader with the given specialization constants (ids 0, 1, ...).
  const Pipeline& pipeline(const std::string& shader, const std::vector<uint32_t>& specialization, uint32_t bindings,
                           uint32_t push_bytes);

  // Records, submits and waits for one launch.
  void run(const Dispatch& d);
  // The host copy of the last launch's results (Output itself when it is host-visible).
  const void* results() const;

 private:
  // Records and runs one submission without a kernel: copies `bytes` from Staging into dst.
  void copy_from_staging(const Buffer& dst, uint64_t bytes);
  // The one command buffer, reset and begun; submit_and_wait ends it, submits it and waits.
  VkCommandBuffer begin_commands();
  void submit_and_wait();

  Buffer create_buffer(uint64_t bytes, bool device_local, bool host_visible);
  void destroy_buffer(Buffer& b);
  uint32_t memory_type(uint32_t allowed, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) const;

  PhysicalDevice physical_;
  VkPhysicalDeviceMemoryProperties memory_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkCommandBuffer command_buffer_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::map<Slot, Buffer> buffers_;
  std::map<std::string, Pipeline> pipelines_;
};

}  // namespace tmorph::vk
