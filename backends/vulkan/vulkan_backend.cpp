// The Vulkan backend plugin: the tm_backend_v1 table core loads from libtensormorph-backend-vulkan.so
// without knowing its name. Everything Vulkan-specific stays behind this table; no exception crosses it.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "tensormorph/op_contracts.h"
#include "tensormorph/plugin_abi.h"
#include "vk_device.h"
#include "vk_error.h"
#include "vk_instance.h"
#include "vk_kernels.h"

namespace {

using namespace tmorph::vk;

struct State {
  // Core may call run, upload and release from several threads at once (the indexer's workers); one
  // device's queue, command buffer and reusable buffers serve one call at a time.
  std::mutex mutex;
  std::unique_ptr<Instance> instance;
  std::vector<std::unique_ptr<Device>> devices;  // created on first use, one per physical device
  std::map<uint64_t, Resident> residents;        // tensors kept on a device, by handle
  uint64_t next_handle = 1;
};
State& state() {
  static State s;
  return s;
}

void write_message(tm_message* msg, const std::string& text) {
  if (!msg) return;
  const size_t n = std::min(text.size(), sizeof msg->text - 1);
  text.copy(msg->text, n);
  msg->text[n] = 0;
}

constexpr uint64_t bit(tm_dtype t) { return uint64_t{1} << t; }
constexpr uint64_t kFloatDtypes =
    bit(TM_DTYPE_F32) | bit(TM_DTYPE_F16) | bit(TM_DTYPE_BF16) | bit(TM_DTYPE_F8_E4M3FN) | bit(TM_DTYPE_F8_E5M2);
constexpr uint64_t kIntDtypes = bit(TM_DTYPE_I8) | bit(TM_DTYPE_I16) | bit(TM_DTYPE_I32) | bit(TM_DTYPE_U8) |
                                bit(TM_DTYPE_U16) | bit(TM_DTYPE_U32) | bit(TM_DTYPE_BOOL);
constexpr uint64_t kNarrowDtypes = bit(TM_DTYPE_F16) | bit(TM_DTYPE_BF16) | bit(TM_DTYPE_F8_E4M3FN) |
                                   bit(TM_DTYPE_F8_E5M2) | bit(TM_DTYPE_I8) | bit(TM_DTYPE_I16) | bit(TM_DTYPE_U8) |
                                   bit(TM_DTYPE_U16) | bit(TM_DTYPE_BOOL);
constexpr uint64_t kWorkspace = 2 * kDefaultChunkBytes;  // the input chunk, and its staging copy on discrete GPUs

struct KernelEntry {
  tm_op op;
  uint64_t dtypes;
  uint64_t features;  // TM_FEATURE_* the shader needs
  uint64_t extra_workspace;
  void (*run)(Device&, const tm_kernel_call_v1&, const Resident*);
  tm_precision_class precision = TM_PRECISION_EXACT;
  double tolerance = 0;
};
// Every kernel but stem.ssb_overlap is exact (bit-identical to the CPU reference; see docs/backends.md). The statistics need
// f64 and int64 arithmetic in shaders. f64, i64 and u64 inputs are not taken: those ops run on the CPU.
constexpr uint64_t kStatsFeatures = TM_FEATURE_F64 | TM_FEATURE_INT64;
const KernelEntry kKernels[] = {
    {TM_OP_STATS_MOMENTS, kFloatDtypes | kIntDtypes, kStatsFeatures, 0, run_moments},
    {TM_OP_STATS_HISTOGRAM, kFloatDtypes | kIntDtypes, kStatsFeatures, 0, run_histogram},
    {TM_OP_STATS_BITPATTERN_HISTOGRAM, kNarrowDtypes, kStatsFeatures, 0, run_bitpattern_histogram},
    {TM_OP_STATS_QUANTILES, bit(TM_DTYPE_F32) | bit(TM_DTYPE_I32) | bit(TM_DTYPE_U32), kStatsFeatures, 16u << 20,
     run_quantiles},
    // A format op: the mask holds ggml type ids (Q4_0 = 2, Q8_0 = 8); the call's dtype is F32. The
    // other block formats have no Vulkan kernel yet and fall back to the CPU op by op.
    {TM_OP_DEQUANTIZE_GGML, (uint64_t{1} << 2) | (uint64_t{1} << 8), 0, 0, run_dequantize_ggml},
    {TM_OP_STEM_FRAME_SUMS, bit(TM_DTYPE_U8) | bit(TM_DTYPE_U16) | bit(TM_DTYPE_U32), kStatsFeatures, 0, run_stem_frame_sums},
    // The compact resident image's bytes (u8), read in place when uploaded once (the residency extension).
    {TM_OP_STEM_COMPACT_SUMS, bit(TM_DTYPE_U8), kStatsFeatures, 0, run_stem_compact_sums},
    // Float64 values, float64 comparisons against host-built thresholds (op_contracts.h).
    {TM_OP_DISPLAY_COLORIZE, bit(TM_DTYPE_F64), kStatsFeatures, 0, run_display_colorize},
    // SSB's per-pixel correction, transforms and reduction: a format op whose mask holds the variants it
    // computes (the quadratic one; higher orders fall back to the CPU). Complex64 transforms summed in
    // another order than FFTW's: within 2e-4 rad of the CPU's phase (deterministic, not bit-identical).
    {TM_OP_STEM_SSB_OVERLAP, uint64_t{1} << TM_SSB_QUADRATIC, kStatsFeatures, 2 * kDefaultChunkBytes, run_stem_ssb_overlap,
     TM_PRECISION_BOUNDED, 2e-4},
    // Level-0 pyramid tiles: every method for every dtype above (the widened method, 8- and 16-bit patterns, the
    // segment lanes of f32, bf16 and f16), bit-identical to the CPU.
    {TM_OP_LOD_TILE_STATS, bit(TM_DTYPE_F32) | bit(TM_DTYPE_BF16) | bit(TM_DTYPE_F16) | bit(TM_DTYPE_F8_E4M3FN) | bit(TM_DTYPE_F8_E5M2) | kIntDtypes,
     kStatsFeatures, 0, run_tile_stats},
};
constexpr uint32_t kKernelCount = sizeof kKernels / sizeof kKernels[0];

uint32_t device_count();

tm_status init(tm_unavailable_reason* reason, tm_message* msg) {
  std::string why;
  *reason = TM_AVAILABLE;
  try {
    state().instance = Instance::create(reason, &why);
  } catch (const std::exception& e) {
    *reason = TM_REASON_NO_DRIVER;
    why = e.what();
  }
  if (!state().instance) {
    write_message(msg, why);
    return TM_OK;  // not an error: the backend is listed as unavailable with the reason
  }
  state().devices.resize(state().instance->devices().size());
  return TM_OK;
}

Device& device_at(uint32_t index) {
  if (index >= device_count()) throw VkError(TM_ERR_INVALID_ARGUMENT, "no Vulkan device " + std::to_string(index));
  auto& slot = state().devices[index];
  if (!slot) slot = std::make_unique<Device>(state().instance->devices()[index]);
  return *slot;
}

void shutdown() {
  for (auto& [handle, r] : state().residents) release_resident(*state().devices.at(r.device_index), r);
  state().residents.clear();
  state().devices.clear();
  state().instance.reset();
  unload_loader();
}

uint32_t device_count() { return state().instance ? static_cast<uint32_t>(state().instance->devices().size()) : 0; }

tm_status device_info(uint32_t index, tm_device_info_v1* out) {
  if (!state().instance || index >= device_count()) return TM_ERR_INVALID_ARGUMENT;
  const PhysicalDevice& d = state().instance->devices()[index];
  const uint32_t caller_size = out->struct_size;  // a core built before an extension knows fewer fields
  tm_device_info_v1 info{};
  info.struct_size = sizeof info;
  info.kind = d.kind;
  info.name = d.name.c_str();
  info.id = d.id.c_str();
  info.memory_bytes = d.device_local_bytes;
  info.max_allocation_bytes = d.max_allocation_bytes;
  info.max_buffer_binding_bytes = d.max_storage_buffer_range;
  info.features = d.features;
  // Declared, not measured: a discrete GPU sits behind PCIe (16 GB/s, a conservative PCIe 4.0 x16);
  // an integrated GPU or a software adapter still receives a copy of the data in host memory (about
  // one memcpy, 10 GB/s). `tensormorph calibrate` measures the kernels, transfer included.
  info.host_link_bytes_per_s = d.kind == TM_DEVICE_GPU ? 16e9 : 10e9;
  info.driver_version = d.driver_version.c_str();
  const size_t n = caller_size && caller_size < sizeof info ? caller_size : sizeof info;
  std::memcpy(out, &info, n);
  out->struct_size = static_cast<uint32_t>(n);
  return TM_OK;
}

uint32_t kernel_count() { return kKernelCount; }

tm_status kernel_info(uint32_t index, tm_kernel_cap_v1* out) {
  if (index >= kKernelCount) return TM_ERR_INVALID_ARGUMENT;
  *out = tm_kernel_cap_v1{};
  out->struct_size = sizeof *out;
  out->op = kKernels[index].op;
  out->dtype_mask = kKernels[index].dtypes;
  out->required_features = kKernels[index].features;
  out->precision = kKernels[index].precision;
  out->tolerance = kKernels[index].tolerance;
  out->workspace_fixed_bytes = kWorkspace + kKernels[index].extra_workspace;
  return TM_OK;
}

// Runs f under the backend's lock and turns what it throws into the ABI's status and message.
template <class F>
tm_status guarded(tm_message* msg, F f) {
  std::lock_guard<std::mutex> lock(state().mutex);
  try {
    f();
    return TM_OK;
  } catch (const VkError& e) {
    write_message(msg, e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    write_message(msg, "out of host memory");
    return TM_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    write_message(msg, e.what());
    return TM_ERR_INTERNAL;
  }
}

tm_status run(const tm_kernel_call_v1* call, tm_message* msg) {
  return guarded(msg, [&] {
    if (!call || !state().instance) throw VkError(TM_ERR_INVALID_ARGUMENT, "no call, or the backend is unavailable");
    if (call->kernel_index >= kKernelCount || kKernels[call->kernel_index].op != call->op)
      throw VkError(TM_ERR_INVALID_ARGUMENT, "kernel " + std::to_string(call->kernel_index) + " does not run op " +
                                                 std::to_string(call->op));
    const KernelEntry& k = kKernels[call->kernel_index];
    const bool format_op = tm_op_takes_format(call->op);  // formats are checked by the kernel
    if (!format_op && (static_cast<uint32_t>(call->dtype) >= 64 || !(k.dtypes & (uint64_t{1} << call->dtype))))
      throw VkError(TM_ERR_UNSUPPORTED, "no Vulkan kernel for dtype " + std::to_string(call->dtype));
    const bool has_residency_fields =
        call->struct_size >= offsetof(tm_kernel_call_v1, input_offset) + sizeof call->input_offset;
    // A resident input may have no host copy (plugin_abi.h): only stem.compact_sums reads such an input.
    const bool device_only_input = has_residency_fields && call->input_buffer && call->op == TM_OP_STEM_COMPACT_SUMS;
    if (call->element_count && !call->input && !device_only_input) throw VkError(TM_ERR_INVALID_ARGUMENT, "null input");
    Device& device = device_at(call->device_index);
    const Resident* resident = nullptr;
    if (has_residency_fields && call->input_buffer && !format_op) {
      auto it = state().residents.find(call->input_buffer);
      if (it == state().residents.end() || it->second.device_index != call->device_index)
        throw VkError(TM_ERR_INVALID_ARGUMENT, "input_buffer " + std::to_string(call->input_buffer) +
                                                   " is not a resident copy on device " + std::to_string(call->device_index));
      const Resident& r = it->second;
      const uint64_t bytes = call->element_count * (call->dtype == TM_DTYPE_F64 ? 8 : dtype_width(call->dtype));
      if (call->input_offset % 65536 || call->input_offset > r.bytes || bytes > r.bytes - call->input_offset)
        throw VkError(TM_ERR_INVALID_ARGUMENT, "the call reads outside its resident copy (offset " +
                                                   std::to_string(call->input_offset) + ", " + std::to_string(bytes) +
                                                   " bytes of " + std::to_string(r.bytes) + ")");
      resident = &r;
    }
    if (call->element_count) k.run(device, *call, resident);
  });
}

tm_status upload(uint32_t device_index, const void* data, uint64_t bytes, uint64_t* buffer, tm_message* msg) {
  return guarded(msg, [&] {
    if (!state().instance || !data || !buffer || bytes == 0) throw VkError(TM_ERR_INVALID_ARGUMENT, "nothing to upload");
    Device& device = device_at(device_index);
    Resident r = make_resident(device, device_index, data, bytes);
    *buffer = state().next_handle++;
    state().residents.emplace(*buffer, std::move(r));
  });
}

void release(uint64_t buffer) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().residents.find(buffer);
  if (it == state().residents.end()) return;
  release_resident(*state().devices.at(it->second.device_index), it->second);
  state().residents.erase(it);
}

const tm_backend_v1 kTable = {
    TM_PLUGIN_ABI_VERSION,
    sizeof(tm_backend_v1),
    "vulkan",
    "portable GPU compute through the Vulkan loader (any Vulkan 1.1 device with f64 and int64 shaders)",
    init,
    shutdown,
    device_count,
    device_info,
    kernel_count,
    kernel_info,
    run,
    upload,
    release,
    nullptr,  // allocate: no op of this backend writes to a device buffer
};

}  // namespace

extern "C" TM_PLUGIN_EXPORT const tm_backend_v1* tensormorph_backend_entry(uint32_t abi_version) {
  return abi_version == TM_PLUGIN_ABI_VERSION ? &kTable : nullptr;
}
