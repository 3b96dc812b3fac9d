#include "vk_device.h"

#include <cstring>

#include "embedded_shaders.h"
#include "vk_error.h"

namespace tmorph::vk {

Device::Device(const PhysicalDevice& physical) : physical_(physical) {
  const Api& a = api();
  if (physical_.compute_queue_family < 0) throw VkError(TM_ERR_UNSUPPORTED, physical_.name + " has no compute queue");
  a.vkGetPhysicalDeviceMemoryProperties(physical_.handle, &memory_);

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{};
  queue.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  queue.queueFamilyIndex = static_cast<uint32_t>(physical_.compute_queue_family);
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkPhysicalDeviceFeatures features{};
  features.shaderFloat64 = (physical_.features & TM_FEATURE_F64) ? VK_TRUE : VK_FALSE;
  features.shaderInt64 = (physical_.features & TM_FEATURE_INT64) ? VK_TRUE : VK_FALSE;
  VkDeviceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue;
  info.pEnabledFeatures = &features;
  check(a.vkCreateDevice(physical_.handle, &info, nullptr, &device_), "vkCreateDevice");
  a.vkGetDeviceQueue(device_, queue.queueFamilyIndex, 0, &queue_);

  VkCommandPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = queue.queueFamilyIndex;
  check(a.vkCreateCommandPool(device_, &pool, nullptr, &command_pool_), "vkCreateCommandPool");
  VkCommandBufferAllocateInfo cb{};
  cb.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  cb.commandPool = command_pool_;
  cb.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cb.commandBufferCount = 1;
  check(a.vkAllocateCommandBuffers(device_, &cb, &command_buffer_), "vkAllocateCommandBuffers");
  VkFenceCreateInfo fence{};
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  check(a.vkCreateFence(device_, &fence, nullptr, &fence_), "vkCreateFence");
}

Device::~Device() {
  const Api& a = api();
  for (auto& [slot, b] : buffers_) destroy_buffer(b);
  for (auto& [name, p] : pipelines_) {
    if (p.pipeline) a.vkDestroyPipeline(device_, p.pipeline, nullptr);
    if (p.pool) a.vkDestroyDescriptorPool(device_, p.pool, nullptr);
    if (p.layout) a.vkDestroyPipelineLayout(device_, p.layout, nullptr);
    if (p.set_layout) a.vkDestroyDescriptorSetLayout(device_, p.set_layout, nullptr);
  }
  if (fence_) a.vkDestroyFence(device_, fence_, nullptr);
  if (command_pool_) a.vkDestroyCommandPool(device_, command_pool_, nullptr);
  if (device_) a.vkDestroyDevice(device_, nullptr);
}

uint32_t Device::memory_type(uint32_t allowed, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred) const {
  int fallback = -1;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    if (!(allowed & (1u << i))) continue;
    const VkMemoryPropertyFlags f = memory_.memoryTypes[i].propertyFlags;
    if ((f & required) != required) continue;
    if ((f & preferred) == preferred) return i;
    if (fallback < 0) fallback = static_cast<int>(i);
  }
  if (fallback < 0) throw VkError(TM_ERR_DEVICE, physical_.name + " has no memory type with the required properties");
  return static_cast<uint32_t>(fallback);
}

Buffer Device::create_buffer(uint64_t bytes, bool device_local, bool host_visible) {
  const Api& a = api();
  Buffer b;
  b.size = (bytes + 3) / 4 * 4;
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = b.size;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  check(a.vkCreateBuffer(device_, &info, nullptr, &b.buffer), "vkCreateBuffer");
  VkMemoryRequirements req{};
  a.vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  VkMemoryPropertyFlags required = 0, preferred = 0;
  if (device_local) required |= VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  if (host_visible) {
    required |= VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    if (!device_local) preferred |= VK_MEMORY_PROPERTY_HOST_CACHED_BIT;  // results are read back
  }
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = req.size;
  try {
    alloc.memoryTypeIndex = memory_type(req.memoryTypeBits, required, required | preferred);
    check(a.vkAllocateMemory(device_, &alloc, nullptr, &b.memory), "vkAllocateMemory");
    check(a.vkBindBufferMemory(device_, b.buffer, b.memory, 0), "vkBindBufferMemory");
    if (host_visible) check(a.vkMapMemory(device_, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "vkMapMemory");
  } catch (...) {
    destroy_buffer(b);
    throw;
  }
  return b;
}

void Device::destroy_buffer(Buffer& b) {
  const Api& a = api();
  if (b.mapped) a.vkUnmapMemory(device_, b.memory);
  if (b.buffer) a.vkDestroyBuffer(device_, b.buffer, nullptr);
  if (b.memory) a.vkFreeMemory(device_, b.memory, nullptr);
  b = Buffer{};
}

Buffer& Device::buffer(Slot slot, uint64_t bytes) {
  Buffer& b = buffers_[slot];
  if (b.buffer && b.size >= bytes) return b;
  destroy_buffer(b);
  // Shaders read their input and write their results (atomics included) in device memory; the host
  // maps it directly when the device offers host-visible device memory (integrated GPUs, software
  // adapters, resizable BAR), else data crosses through Staging and Readback.
  const bool uma = physical_.host_visible_device_memory;
  switch (slot) {
    case Slot::Input:
    case Slot::Output: b = create_buffer(bytes, true, uma); break;
    case Slot::Staging:
    case Slot::Readback:
    case Slot::Aux: b = create_buffer(bytes, false, true); break;
    case Slot::Scratch0:
    case Slot::Scratch1: b = create_buffer(bytes, true, false); break;
  }
  return b;
}

uint64_t Device::write_input(const void* data, uint64_t bytes) {
  const uint64_t padded = (bytes + 3) / 4 * 4;
  Buffer& input = buffer(Slot::Input, padded);
  Buffer& target = input.mapped ? input : buffer(Slot::Staging, padded);
  auto* dst = static_cast<uint8_t*>(target.mapped);
  std::memcpy(dst, data, bytes);
  std::memset(dst + bytes, 0, padded - bytes);
  return input.mapped ? 0 : padded;
}

const Pipeline& Device::pipeline(const std::string& shader, const std::vector<uint32_t>& specialization,
                                 uint32_t bindings, uint32_t push_bytes) {
  std::string key = shader;
  for (uint32_t v : specialization) key.append(":").append(std::to_string(v));
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;
  const EmbeddedShader* spv = find_shader(shader);
  if (!spv) throw VkError(TM_ERR_INTERNAL, "no embedded shader named " + shader);
  const Api& a = api();
  Pipeline& p = pipelines_[key];
  p.bindings = bindings;
  p.push_bytes = push_bytes;

  std::vector<VkDescriptorSetLayoutBinding> slots(bindings);
  for (uint32_t i = 0; i < bindings; ++i) {
    slots[i].binding = i;
    slots[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    slots[i].descriptorCount = 1;
    slots[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo dsl{};
  dsl.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
  dsl.bindingCount = bindings;
  dsl.pBindings = slots.data();
  check(a.vkCreateDescriptorSetLayout(device_, &dsl, nullptr, &p.set_layout), "vkCreateDescriptorSetLayout");
  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes};
  VkPipelineLayoutCreateInfo layout{};
  layout.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &p.set_layout;
  layout.pushConstantRangeCount = push_bytes ? 1 : 0;
  layout.pPushConstantRanges = &push;
  check(a.vkCreatePipelineLayout(device_, &layout, nullptr, &p.layout), "vkCreatePipelineLayout");

  VkShaderModuleCreateInfo module_info{};
  module_info.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
  module_info.codeSize = spv->bytes;
  module_info.pCode = spv->words;
  VkShaderModule module = VK_NULL_HANDLE;
  check(a.vkCreateShaderModule(device_, &module_info, nullptr, &module), "vkCreateShaderModule");
  std::vector<VkSpecializationMapEntry> entries(specialization.size());
  for (uint32_t i = 0; i < entries.size(); ++i) entries[i] = {i, i * 4u, 4u};
  VkSpecializationInfo spec{};
  spec.mapEntryCount = static_cast<uint32_t>(entries.size());
  spec.pMapEntries = entries.data();
  spec.dataSize = specialization.size() * 4;
  spec.pData = specialization.data();
  VkComputePipelineCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = &spec;
  info.layout = p.layout;
  const VkResult r = a.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &p.pipeline);
  a.vkDestroyShaderModule(device_, module, nullptr);
  check(r, "vkCreateComputePipelines");

  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, bindings};
  VkDescriptorPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
  pool.maxSets = 1;
  pool.poolSizeCount = 1;
  pool.pPoolSizes = &size;
  check(a.vkCreateDescriptorPool(device_, &pool, nullptr, &p.pool), "vkCreateDescriptorPool");
  VkDescriptorSetAllocateInfo set{};
  set.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
  set.descriptorPool = p.pool;
  set.descriptorSetCount = 1;
  set.pSetLayouts = &p.set_layout;
  check(a.vkAllocateDescriptorSets(device_, &set, &p.set), "vkAllocateDescriptorSets");
  return p;
}

Buffer Device::make_resident(const void* data, uint64_t bytes) {
  const uint64_t padded = (bytes + 3) / 4 * 4;
  Buffer b = create_buffer(padded, true, physical_.host_visible_device_memory);
  try {
    Buffer& target = b.mapped ? b : buffer(Slot::Staging, padded);
    std::memcpy(target.mapped, data, bytes);
    std::memset(static_cast<uint8_t*>(target.mapped) + bytes, 0, padded - bytes);
    if (!b.mapped) copy_from_staging(b, padded);
  } catch (...) {
    destroy_buffer(b);
    throw;
  }
  return b;
}

VkCommandBuffer Device::begin_commands() {
  const Api& a = api();
  check(a.vkResetCommandBuffer(command_buffer_, 0), "vkResetCommandBuffer");
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  check(a.vkBeginCommandBuffer(command_buffer_, &begin), "vkBeginCommandBuffer");
  return command_buffer_;
}

void Device::submit_and_wait() {
  const Api& a = api();
  check(a.vkEndCommandBuffer(command_buffer_), "vkEndCommandBuffer");
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &command_buffer_;
  check(a.vkResetFences(device_, 1, &fence_), "vkResetFences");
  check(a.vkQueueSubmit(queue_, 1, &submit, fence_), "vkQueueSubmit");
  check(a.vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

void Device::copy_from_staging(const Buffer& dst, uint64_t bytes) {
  VkCommandBuffer cb = begin_commands();
  VkBufferCopy region{0, 0, bytes};
  api().vkCmdCopyBuffer(cb, buffers_.at(Slot::Staging).buffer, dst.buffer, 1, &region);
  submit_and_wait();
}

const void* Device::results() const {
  const Buffer& output = buffers_.at(Slot::Output);
  return output.mapped ? output.mapped : buffers_.at(Slot::Readback).mapped;
}

void Device::run(const Dispatch& d) {
  const Api& a = api();
  // Readback must exist before recording (buffer() may create it); Output was sized by the kernel.
  if (d.result_bytes && !buffers_[Slot::Output].mapped) buffer(Slot::Readback, d.result_bytes);
  const Pipeline& p = *d.pipeline;
  // The previous launch has completed (run waits), so the one descriptor set can be rewritten.
  std::vector<VkDescriptorBufferInfo> infos(p.bindings);
  std::vector<VkWriteDescriptorSet> writes(p.bindings);
  for (uint32_t i = 0; i < p.bindings; ++i) {
    infos[i] = {d.bindings.at(i).buffer->buffer, d.bindings.at(i).offset, VK_WHOLE_SIZE};
    writes[i] = {};
    writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
    writes[i].dstSet = p.set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  a.vkUpdateDescriptorSets(device_, p.bindings, writes.data(), 0, nullptr);

  VkCommandBuffer cb = begin_commands();
  const bool transfers = d.upload_bytes > 0 || !d.zero_first.empty();
  if (d.upload_bytes) {
    VkBufferCopy region{0, 0, d.upload_bytes};
    a.vkCmdCopyBuffer(cb, buffers_.at(Slot::Staging).buffer, buffers_.at(Slot::Input).buffer, 1, &region);
  }
  for (const auto& [buf, bytes] : d.zero_first) a.vkCmdFillBuffer(cb, buf->buffer, 0, bytes, 0);
  VkMemoryBarrier barrier{};
  barrier.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
  // Host writes (mapped input, edges), transfers and earlier launches' shader writes (a multi-pass op
  // reading what its previous launch wrote) become visible to the shader.
  barrier.srcAccessMask = VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT | (transfers ? VK_ACCESS_TRANSFER_WRITE_BIT : 0);
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
  a.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
  a.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
  a.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &p.set, 0, nullptr);
  if (p.push_bytes) a.vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_bytes, d.push);
  a.vkCmdDispatch(cb, d.groups, 1, 1);
  const Buffer& output = buffers_[Slot::Output];
  const bool read_back = d.result_bytes && !output.mapped;
  if (read_back) {  // device-local results cross to the host through Readback
    barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
    barrier.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
    a.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0,
                           nullptr, 0, nullptr);
    VkBufferCopy region{0, 0, d.result_bytes};
    a.vkCmdCopyBuffer(cb, output.buffer, buffers_.at(Slot::Readback).buffer, 1, &region);
  }
  // Shader writes (or the readback copy) become visible to the host.
  barrier.srcAccessMask = read_back ? VK_ACCESS_TRANSFER_WRITE_BIT : VK_ACCESS_SHADER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  a.vkCmdPipelineBarrier(cb, read_back ? VK_PIPELINE_STAGE_TRANSFER_BIT : VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
  submit_and_wait();
}

}  // namespace tmorph::vk
