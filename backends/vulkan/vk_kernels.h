// The Vulkan kernels: each runs one op of op_contracts.h over host data, chunk by chunk. A chunk
// never exceeds the device's maxStorageBufferRange nor its largest allocation (see chunk_bytes), so
// a tensor of any size runs on a device that binds only 128 MiB at a time (lavapipe).
#pragma once

#include <cstdint>
#include <vector>

#include "tensormorph/plugin_abi.h"
#include "vk_device.h"

namespace tmorph::vk {

// Bytes per element of a dtype the kernels take (throws VkError TM_ERR_UNSUPPORTED for the others).
uint32_t dtype_width(tm_dtype dt);

// Bytes of input one launch reads: min(64 MiB, maxStorageBufferRange, maxMemoryAllocationSize), or
// TENSORMORPH_VULKAN_CHUNK_BYTES when set (a testing knob: small chunks exercise chunk boundaries).
uint64_t chunk_bytes(const PhysicalDevice& device);
// The largest chunk any device uses by default (what the kernels declare as workspace).
constexpr uint64_t kDefaultChunkBytes = uint64_t{64} << 20;

// A tensor kept on the device (the residency extension): its bytes in chunks of `chunk_bytes` (a
// multiple of 262,144, so every chunk starts on a canonical block of any dtype up to 4 bytes wide).
struct Resident {
  uint32_t device_index = 0;
  uint64_t bytes = 0;
  uint64_t chunk_bytes = 0;
  std::vector<Buffer> chunks;
};

// Copies host data to the device as a Resident; release_resident frees it.
Resident make_resident(Device& device, uint32_t device_index, const void* data, uint64_t bytes);
void release_resident(Device& device, Resident& resident);

// Each validates the call's sizes against its contract (TM_ERR_INVALID_ARGUMENT) and throws VkError.
// `resident` (may be null) holds the call's input on this device from call.input_offset on.
void run_moments(Device& device, const tm_kernel_call_v1& call, const Resident* resident);
void run_histogram(Device& device, const tm_kernel_call_v1& call, const Resident* resident);
void run_bitpattern_histogram(Device& device, const tm_kernel_call_v1& call, const Resident* resident);
void run_quantiles(Device& device, const tm_kernel_call_v1& call, const Resident* resident);
// dequantize.ggml for Q4_0 and Q8_0 (host input only; `resident` is ignored).
void run_dequantize_ggml(Device& device, const tm_kernel_call_v1& call, const Resident* resident);
// TM_OP_STEM_FRAME_SUMS: one workgroup per frame, frames uploaded a chunk at a time.
void run_stem_frame_sums(Device& device, const tm_kernel_call_v1& call, const Resident* resident);
// TM_OP_STEM_COMPACT_SUMS (vk_compact_sums.cpp): the compact image a page per launch, read in place when resident
// (input may then be null), else copied from the host a page at a time.
void run_stem_compact_sums(Device& device, const tm_kernel_call_v1& call, const Resident* resident);
// TM_OP_DISPLAY_COLORIZE: f64 values a chunk at a time (host or resident); thresholds and the colour
// table in Aux; per-launch 32-bit counts added into the call's 64-bit counts.
void run_display_colorize(Device& device, const tm_kernel_call_v1& call, const Resident* resident);
// TM_OP_STEM_SSB_OVERLAP, quadratic variant (vk_ssb_kernel.cpp): host spectra uploaded a batch of pixels
// at a time; TM_ERR_UNSUPPORTED for the direct variant.
void run_stem_ssb_overlap(Device& device, const tm_kernel_call_v1& call, const Resident* resident);
// TM_OP_LOD_TILE_STATS (vk_tile_stats.cpp): the widened method, and the pattern method of 8-bit dtypes;
// TM_ERR_UNSUPPORTED for the other methods. Host input only (`resident` is ignored).
void run_tile_stats(Device& device, const tm_kernel_call_v1& call, const Resident* resident);

}  // namespace tmorph::vk
