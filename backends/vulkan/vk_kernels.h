// The Vulkan kernels: each runs one op of op_contracts.h over host data, chunk by chunk. A chunk
// never exceeds the device's maxStorageBufferRange nor its largest allocation (see chunk_bytes), so
// a tensor of any size runs on a device that binds only 128 MiB at a time (lavapipe).
#pragma once

#include <cstdint>

#include "tensormorph/plugin_abi.h"
#include "vk_device.h"

namespace tmorph::vk {

// Bytes of input one launch reads: min(64 MiB, maxStorageBufferRange, maxMemoryAllocationSize), or
// TENSORMORPH_VULKAN_CHUNK_BYTES when set (a testing knob: small chunks exercise chunk boundaries).
uint64_t chunk_bytes(const PhysicalDevice& device);
// The largest chunk any device uses by default (what the kernels declare as workspace).
constexpr uint64_t kDefaultChunkBytes = uint64_t{64} << 20;

// Each validates the call's sizes against its contract (TM_ERR_INVALID_ARGUMENT) and throws VkError.
void run_moments(Device& device, const tm_kernel_call_v1& call);
void run_histogram(Device& device, const tm_kernel_call_v1& call);
void run_bitpattern_histogram(Device& device, const tm_kernel_call_v1& call);
void run_quantiles(Device& device, const tm_kernel_call_v1& call);

}  // namespace tmorph::vk
