// The tm_backend_v1 table of a GPU backend, one source for CUDA, HIP and the host emulation. The
// including translation unit defines TM_GPU_CUDA / TM_GPU_HIP / TM_GPU_HOST (gpu_runtime.h) and:
//   TM_GPU_BACKEND_NAME         short name ("cuda", "hip", "gpuemu")
//   TM_GPU_BACKEND_DESCRIPTION  one sentence for `tensormorph backends`
//   TM_GPU_DEVICE_KIND          tm_device_kind of its devices
//   TM_GPU_LINK_BYTES_PER_S     declared host link bandwidth (calibration measures the real one)
// Everything device-specific stays behind the table; no exception crosses it. Calls are serialised by
// one mutex (a device's buffers serve one call at a time).
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_chunks.h"
#include "gpu_kernels.inl"
#include "gpu_runtime.h"
#include "tensormorph/contract_math.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/plugin_abi.h"

namespace tmorph::gpu {
namespace {

// A failure with the ABI status it maps to.
class GpuError : public std::runtime_error {
 public:
  GpuError(tm_status status, const std::string& what) : std::runtime_error(what), status_(status) {}
  tm_status status() const { return status_; }

 private:
  tm_status status_;
};

void check(gpuError_t e, const char* what) {
  if (e == gpuSuccess) return;
  throw GpuError(TM_ERR_DEVICE, std::string(TM_GPU_API_NAME) + " " + what + " failed: " + gpuGetErrorName(e) + " (" +
                                    gpuGetErrorString(e) + ")");
}

// Device memory owned for the length of a call (or of a resident copy).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(uint64_t bytes) : bytes_(bytes) {
    if (gpuMalloc(&ptr_, bytes ? bytes : 1) != gpuSuccess) {
      ptr_ = nullptr;
      (void)gpuGetLastError();  // clear the sticky allocation error
      throw GpuError(TM_ERR_OUT_OF_MEMORY, "cannot allocate " + std::to_string(bytes) + " bytes of device memory");
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_), std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (ptr_) (void)gpuFree(ptr_);
  }
  template <class T = unsigned char>
  T* get() const { return static_cast<T*>(ptr_); }
  uint64_t bytes() const { return bytes_; }
  // Gives up ownership (a resident copy outlives the call).
  unsigned char* release() {
    auto* p = static_cast<unsigned char*>(ptr_);
    ptr_ = nullptr;
    return p;
  }

  void upload(const void* host, uint64_t bytes, uint64_t offset = 0) {
    if (bytes) check(gpuMemcpyHostToDevice(get() + offset, host, bytes), "copy to the device");
  }
  void download(void* host, uint64_t bytes) const {
    if (bytes) check(gpuMemcpyDeviceToHost(host, ptr_, bytes), "copy from the device");
  }
  void zero() { check(gpuMemset(ptr_, 0, bytes_ ? bytes_ : 1), "memset"); }

 private:
  void* ptr_ = nullptr;
  uint64_t bytes_ = 0;
};

void finish_launch(const char* kernel) {
  check(gpuGetLastError(), kernel);
  check(gpuDeviceSynchronize(), kernel);
}

}  // namespace
}  // namespace tmorph::gpu
#include "gpu_fft.inl"  // GpuFft, TM_GPU_HAS_FFT (needs GpuError)
namespace tmorph::gpu {
namespace {

// A resident copy: plain data (clang-15's HIP front end crashes instantiating a std::map node that holds a
// move-only member), freed by release and shutdown.
struct Resident {
  uint32_t device;
  unsigned char* ptr;
  uint64_t bytes;
};
void free_resident(const Resident& r) { (void)gpuFree(r.ptr); }

struct DeviceRecord {
  std::string name, id, driver;
  uint64_t memory = 0;
};

struct State {
  std::mutex mutex;
  bool ready = false;
  std::vector<DeviceRecord> devices;
  std::map<uint64_t, Resident> residents;
  uint64_t next_handle = 1;
  // The device output of the call now running (output_buffer from output_offset on), else null.
  unsigned char* device_output = nullptr;
  uint64_t device_output_bytes = 0;
  int current_device = -1;
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

constexpr uint64_t bit(unsigned t) { return uint64_t{1} << t; }
constexpr uint64_t kNarrowFloats = bit(TM_DTYPE_F32) | bit(TM_DTYPE_F16) | bit(TM_DTYPE_BF16) |
                                   bit(TM_DTYPE_F8_E4M3FN) | bit(TM_DTYPE_F8_E5M2);
constexpr uint64_t kNarrowInts = bit(TM_DTYPE_I8) | bit(TM_DTYPE_I16) | bit(TM_DTYPE_I32) | bit(TM_DTYPE_U8) |
                                 bit(TM_DTYPE_U16) | bit(TM_DTYPE_U32) | bit(TM_DTYPE_BOOL);
constexpr uint64_t kWide = bit(TM_DTYPE_F64) | bit(TM_DTYPE_I64) | bit(TM_DTYPE_U64);
constexpr uint64_t kBitpatternDtypes = bit(TM_DTYPE_F16) | bit(TM_DTYPE_BF16) | bit(TM_DTYPE_F8_E4M3FN) |
                                       bit(TM_DTYPE_F8_E5M2) | bit(TM_DTYPE_I8) | bit(TM_DTYPE_I16) |
                                       bit(TM_DTYPE_U8) | bit(TM_DTYPE_U16) | bit(TM_DTYPE_BOOL);
constexpr uint64_t kFrameDtypes = bit(TM_DTYPE_U8) | bit(TM_DTYPE_U16) | bit(TM_DTYPE_U32);
constexpr uint64_t kLegacyGgml = bit(kQ4_0) | bit(kQ4_1) | bit(kQ5_0) | bit(kQ5_1) | bit(kQ8_0);
constexpr uint64_t kKQuants = bit(kQ2_K) | bit(kQ3_K) | bit(kQ4_K) | bit(kQ5_K) | bit(kQ6_K) | bit(kQ8_K);
constexpr uint64_t kFeatures = TM_FEATURE_F64 | TM_FEATURE_F16 | TM_FEATURE_INT64 | TM_FEATURE_INT64_ATOMICS;
// Input bytes one piece of a call moves to the device (each piece also needs its outputs): 256 MiB, or
// TENSORMORPH_GPU_CHUNK_BYTES (the parity tests shrink it to exercise pieces; at least 4 KiB).
constexpr uint64_t kChunkBytes = 256ull << 20;
uint64_t chunk_bytes() {
  const char* v = std::getenv("TENSORMORPH_GPU_CHUNK_BYTES");
  const uint64_t n = v && *v ? std::strtoull(v, nullptr, 10) : 0;
  return n >= 4096 ? n : kChunkBytes;
}

// A call's input on the device: the resident copy, or this piece uploaded.
struct Input {
  const unsigned char* ptr = nullptr;
  DeviceBuffer owned;
};

void run_moments(const tm_kernel_call_v1&, const unsigned char*);
void run_histogram(const tm_kernel_call_v1&, const unsigned char*);
void run_bitpattern(const tm_kernel_call_v1&, const unsigned char*);
void run_quantiles(const tm_kernel_call_v1&, const unsigned char*);
void run_frame_sums(const tm_kernel_call_v1&, const unsigned char*);
void run_pattern_reduce(const tm_kernel_call_v1&, const unsigned char*);
void run_compact_sums(const tm_kernel_call_v1&, const unsigned char*);
void run_colorize(const tm_kernel_call_v1&, const unsigned char*);
void run_dequantize(const tm_kernel_call_v1&, const unsigned char*);
void run_quant_moments(const tm_kernel_call_v1&, const unsigned char*);
void run_decode_chunks(const tm_kernel_call_v1&, const unsigned char*);
#if TM_GPU_HAS_FFT
void run_ssb(const tm_kernel_call_v1&, const unsigned char*);
#endif

struct KernelEntry {
  tm_op op;
  uint64_t mask;  // dtypes, or formats for a format op
  void (*run)(const tm_kernel_call_v1&, const unsigned char* resident);
  tm_precision_class precision = TM_PRECISION_EXACT;
  double tolerance = 0;  // of a bounded kernel (op_contracts.h states what it bounds)
};
// i64/u64 moments stay on the CPU: their reference rounds a 128-bit sum through long double, which no
// device has. f64/i64/u64 histograms are exact here (comparisons of the CPU's own double conversions).
const KernelEntry kKernels[] = {
    {TM_OP_STATS_MOMENTS, kNarrowFloats | kNarrowInts | bit(TM_DTYPE_F64), run_moments},
    {TM_OP_STATS_HISTOGRAM, kNarrowFloats | kNarrowInts | kWide, run_histogram},
    {TM_OP_STATS_BITPATTERN_HISTOGRAM, kBitpatternDtypes, run_bitpattern},
    {TM_OP_STATS_QUANTILES, bit(TM_DTYPE_F32) | bit(TM_DTYPE_I32) | bit(TM_DTYPE_U32) | kWide, run_quantiles},
    {TM_OP_STEM_FRAME_SUMS, kFrameDtypes, run_frame_sums},
    {TM_OP_STEM_PATTERN_REDUCE, kFrameDtypes, run_pattern_reduce},
    // The compact resident image's bytes (u8), read in place when uploaded once (the residency extension).
    {TM_OP_STEM_COMPACT_SUMS, bit(TM_DTYPE_U8), run_compact_sums},
    {TM_OP_DISPLAY_COLORIZE, bit(TM_DTYPE_F64), run_colorize},
    {TM_OP_DEQUANTIZE_GGML, kLegacyGgml | kKQuants, run_dequantize},
    {TM_OP_QUANT_MOMENTS, bit(kQ4_0) | bit(kQ8_0), run_quant_moments},
    {TM_OP_DECODE_BITSHUFFLE_LZ4, kNarrowFloats | kNarrowInts | kWide, run_decode_chunks},
#if TM_GPU_HAS_FFT
    // Both variants; complex64 planes and FFTs, float64 masks and sums: the Vulkan kernel's stated bound.
    {TM_OP_STEM_SSB_OVERLAP, bit(TM_SSB_QUADRATIC) | bit(TM_SSB_DIRECT), run_ssb, TM_PRECISION_BOUNDED, 2e-4},
#endif
};
constexpr uint32_t kKernelCount = sizeof kKernels / sizeof kKernels[0];

uint64_t element_bytes(const tm_kernel_call_v1& c) { return c.element_count * dtype_width(c.dtype); }

template <class P>
const P& params_of(const tm_kernel_call_v1& c) {
  if (!c.params || c.params_size < sizeof(P))
    throw GpuError(TM_ERR_INVALID_ARGUMENT, "params missing or shorter than the op's params struct");
  return *static_cast<const P*>(c.params);
}
void need_output(const tm_kernel_call_v1& c, uint64_t bytes) {
  if (!c.output || c.output_size < bytes)
    throw GpuError(TM_ERR_INVALID_ARGUMENT, "output of " + std::to_string(c.output_size) + " bytes, the op needs " +
                                                std::to_string(bytes));
}

// Piece [first, first + count) of the call's input on the device.
Input input_piece(const tm_kernel_call_v1& c, const unsigned char* resident, uint64_t first, uint64_t count,
                  uint64_t width) {
  Input in;
  if (resident) {
    in.ptr = resident + first * width;
  } else {
    in.owned = DeviceBuffer(count * width);
    in.owned.upload(static_cast<const unsigned char*>(c.input) + first * width, count * width);
    in.ptr = in.owned.get();
  }
  return in;
}

void run_moments(const tm_kernel_call_v1& c, const unsigned char* resident) {
  const uint64_t blocks = (c.element_count + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
  need_output(c, blocks * sizeof(tm_moments_partial_v1));
  const unsigned width = dtype_width(c.dtype);
  auto* out = static_cast<tm_moments_partial_v1*>(c.output);
  for (const Chunk& piece : plan_chunks(c.element_count, TM_STATS_BLOCK_ELEMENTS, uint64_t{TM_STATS_BLOCK_ELEMENTS} * width, chunk_bytes())) {
    const Input in = input_piece(c, resident, piece.first, piece.count, width);
    const uint64_t nb = (piece.count + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
    DeviceBuffer lanes(nb * TM_STATS_LANES * sizeof(LaneSums)), partials(nb * sizeof(tm_moments_partial_v1)),
        states(nb * sizeof(BlockState));
    const unsigned lane_grid = grid_for(nb * TM_STATS_LANES, 64), block_grid = grid_for(nb, 64);
    TM_GPU_LAUNCH(moments_lanes_kernel, lane_grid, 64, in.ptr, piece.count, unsigned(c.dtype), nb, lanes.get<LaneSums>());
    finish_launch("moments_lanes_kernel");
    TM_GPU_LAUNCH(moments_reduce_kernel, block_grid, 64, piece.count, unsigned(c.dtype), nb,
                  static_cast<const LaneSums*>(lanes.get<LaneSums>()), partials.get<tm_moments_partial_v1>(),
                  states.get<BlockState>());
    finish_launch("moments_reduce_kernel");
    TM_GPU_LAUNCH(moments_deviation_kernel, lane_grid, 64, in.ptr, piece.count, unsigned(c.dtype), nb,
                  static_cast<const BlockState*>(states.get<BlockState>()), lanes.get<LaneSums>());
    finish_launch("moments_deviation_kernel");
    TM_GPU_LAUNCH(moments_finish_kernel, block_grid, 64, nb, static_cast<const BlockState*>(states.get<BlockState>()),
                  static_cast<const LaneSums*>(lanes.get<LaneSums>()), partials.get<tm_moments_partial_v1>());
    finish_launch("moments_finish_kernel");
    partials.download(out + piece.first / TM_STATS_BLOCK_ELEMENTS, nb * sizeof(tm_moments_partial_v1));
  }
}

// Adds a device array of uint64 counts into the caller's (the ops whose counts are ADDED).
void add_counts(const DeviceBuffer& counts, uint64_t n, uint64_t* host) {
  std::vector<uint64_t> part(n);
  counts.download(part.data(), n * sizeof(uint64_t));
  for (uint64_t i = 0; i < n; ++i) host[i] += part[i];
}

void run_histogram(const tm_kernel_call_v1& c, const unsigned char* resident) {
  const auto& p = params_of<tm_histogram_params_v1>(c);
  if (p.bins < 1 || p.bins > 65536 || !p.edges)
    throw GpuError(TM_ERR_INVALID_ARGUMENT, "histogram needs 1..65536 bins and their edges");
  for (uint32_t i = 0; i < p.bins; ++i)
    if (!(p.edges[i] < p.edges[i + 1]))
      throw GpuError(TM_ERR_INVALID_ARGUMENT, "histogram edges must be finite and strictly increasing (edge " +
                                                  std::to_string(i + 1) + ")");
  const uint64_t slots = uint64_t{p.bins} + 2;
  need_output(c, slots * sizeof(uint64_t));
  DeviceBuffer edges((p.bins + 1) * sizeof(double)), counts(slots * sizeof(uint64_t));
  edges.upload(p.edges, (p.bins + 1) * sizeof(double));
  counts.zero();
  const unsigned width = dtype_width(c.dtype);
  for (const Chunk& piece : plan_chunks(c.element_count, 1, width, chunk_bytes())) {
    const Input in = input_piece(c, resident, piece.first, piece.count, width);
    TM_GPU_LAUNCH(histogram_kernel, grid_for(piece.count), kThreads, in.ptr, piece.count, unsigned(c.dtype),
                  static_cast<const double*>(edges.get<double>()), unsigned(p.bins), counts.get<u64>());
    finish_launch("histogram_kernel");
  }
  add_counts(counts, slots, static_cast<uint64_t*>(c.output));
}

void run_bitpattern(const tm_kernel_call_v1& c, const unsigned char* resident) {
  const unsigned width = dtype_width(c.dtype);
  const uint64_t slots = uint64_t{1} << (8 * width);
  need_output(c, slots * sizeof(uint64_t));
  DeviceBuffer counts(slots * sizeof(uint64_t));
  counts.zero();
  for (const Chunk& piece : plan_chunks(c.element_count, 1, width, chunk_bytes())) {
    const Input in = input_piece(c, resident, piece.first, piece.count, width);
    TM_GPU_LAUNCH(bitpattern_kernel, grid_for(piece.count), kThreads, in.ptr, piece.count, width, counts.get<u64>());
    finish_launch("bitpattern_kernel");
  }
  add_counts(counts, slots, static_cast<uint64_t*>(c.output));
}

// Exact quantiles (the CPU's definition, contract_math.h): each wanted rank's key is found digit by digit,
// 16 bits a pass, from counts of the keys that share its higher digits; at most 16 prefixes per launch.
void run_quantiles(const tm_kernel_call_v1& c, const unsigned char* resident) {
  const auto& p = params_of<tm_quantiles_params_v1>(c);
  if (p.count && !p.probabilities) throw GpuError(TM_ERR_INVALID_ARGUMENT, "quantiles without probabilities");
  for (uint32_t q = 0; q < p.count; ++q)
    if (!(p.probabilities[q] >= 0 && p.probabilities[q] <= 1))
      throw GpuError(TM_ERR_INVALID_ARGUMENT, "probability " + std::to_string(q) + " is not in [0, 1]");
  need_output(c, uint64_t{p.count} * sizeof(tm_quantile_value_v1));
  auto* out = static_cast<tm_quantile_value_v1*>(c.output);
  const unsigned width = dtype_width(c.dtype), key_bits = 8 * width, passes = key_bits / 16;
  constexpr unsigned kTargetsPerLaunch = 16;
  // Counts digit `pass` of the keys under each of targets (sorted prefixes), summed over the input's pieces.
  auto count = [&](unsigned pass, const std::vector<uint64_t>& targets) {
    const unsigned groups = pass == 0 ? 1 : static_cast<unsigned>(targets.size());
    DeviceBuffer dev_targets(std::max<size_t>(1, targets.size()) * sizeof(uint64_t)), counts(uint64_t{groups} * 65536 * 8);
    dev_targets.upload(targets.data(), targets.size() * sizeof(uint64_t));
    counts.zero();
    for (const Chunk& piece : plan_chunks(c.element_count, 1, width, chunk_bytes())) {
      const Input in = input_piece(c, resident, piece.first, piece.count, width);
      TM_GPU_LAUNCH(radix_count_kernel, grid_for(piece.count), kThreads, in.ptr, piece.count, unsigned(c.dtype), key_bits,
                    pass, static_cast<const uint64_t*>(dev_targets.get<uint64_t>()), groups, counts.get<u64>());
      finish_launch("radix_count_kernel");
    }
    std::vector<uint64_t> host(uint64_t{groups} * 65536);
    counts.download(host.data(), host.size() * sizeof(uint64_t));
    return host;
  };
  const std::vector<uint64_t> top = count(0, {});
  uint64_t n = 0;
  for (uint64_t v : top) n += v;
  if (n == 0) {
    for (uint32_t q = 0; q < p.count; ++q) out[q] = {NAN, NAN, NAN, 0};
    return;
  }
  const std::vector<uint64_t> ranks = ranks_read(p.probabilities, p.count, n);
  // Per rank: the key digits found so far, and how many finite keys lie below that prefix.
  std::vector<uint64_t> prefix(ranks.size(), 0), below(ranks.size(), 0);
  // The digit under which rank r lies, given the counts of the digits under its prefix; `below` grows by
  // the keys of the smaller digits. Returns the prefix extended by that digit.
  auto descend = [&](size_t r, const uint64_t* counts) {
    uint64_t seen = below[r];
    unsigned d = 0;
    for (; d < 65535; ++d) {
      if (seen + counts[d] > ranks[r]) break;
      seen += counts[d];
    }
    below[r] = seen;
    return (prefix[r] << 16) | d;
  };
  for (size_t r = 0; r < ranks.size(); ++r) prefix[r] = descend(r, top.data());
  for (unsigned pass = 1; pass < passes; ++pass) {
    std::vector<uint64_t> wanted(prefix), next(prefix);
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    for (size_t first = 0; first < wanted.size(); first += kTargetsPerLaunch) {
      const std::vector<uint64_t> targets(wanted.begin() + first, wanted.begin() + std::min(wanted.size(), first + kTargetsPerLaunch));
      const std::vector<uint64_t> counts = count(pass, targets);
      for (size_t r = 0; r < ranks.size(); ++r) {  // every rank's prefix is in exactly one launch's targets
        const auto t = std::lower_bound(targets.begin(), targets.end(), prefix[r]);
        if (t != targets.end() && *t == prefix[r]) next[r] = descend(r, counts.data() + (t - targets.begin()) * 65536);
      }
    }
    prefix = next;
  }
  // Keys back to values: the inverse of order_key, widened as the CPU widens them.
  auto value_of_key = [&](uint64_t key) {
    const uint64_t sign = uint64_t{1} << (key_bits - 1);
    uint64_t bits = key;
    if (c.dtype == TM_DTYPE_F32 || c.dtype == TM_DTYPE_F64)
      bits = (key & sign) ? (key & ~sign) : (~key & (key_bits == 64 ? ~uint64_t{0} : (uint64_t{1} << 32) - 1));
    else if (c.dtype == TM_DTYPE_I32 || c.dtype == TM_DTYPE_I64)
      bits = key ^ sign;
    unsigned cls;
    return load_value(reinterpret_cast<const unsigned char*>(&bits), 0, c.dtype, &cls);
  };
  for (uint32_t q = 0; q < p.count; ++q) {
    const double value = quantile_of(p.probabilities[q], n, [&](uint64_t r) {
      return value_of_key(prefix[std::lower_bound(ranks.begin(), ranks.end(), r) - ranks.begin()]);
    });
    out[q] = {value, value, value, n};
  }
}

// Frames of a 4D-STEM call: element_count must be a whole number of frames.
uint64_t frame_count(const tm_kernel_call_v1& c, uint64_t pixels) {
  if (pixels == 0 || c.element_count % pixels)
    throw GpuError(TM_ERR_INVALID_ARGUMENT, std::to_string(c.element_count) + " elements are not whole frames of " +
                                                std::to_string(pixels) + " pixels");
  return c.element_count / pixels;
}

void run_frame_sums(const tm_kernel_call_v1& c, const unsigned char* resident) {
  const auto& p = params_of<tm_stem_frame_sums_params_v1>(c);
  const uint64_t frames = frame_count(c, p.pixels_per_frame);
  if (p.cols == 0 || p.pixels_per_frame % p.cols)
    throw GpuError(TM_ERR_INVALID_ARGUMENT, "frame of " + std::to_string(p.pixels_per_frame) + " pixels is not whole rows of " +
                                                std::to_string(p.cols));
  if (p.list_count && (!p.list_offsets || !p.list_pixels))
    throw GpuError(TM_ERR_INVALID_ARGUMENT, "pixel lists given without offsets or pixels");
  if (p.com_list != TM_STEM_ALL_PIXELS && p.com_list >= p.list_count)
    throw GpuError(TM_ERR_INVALID_ARGUMENT, "com_list " + std::to_string(p.com_list) + " names no list");
  const uint64_t entries = p.list_count ? p.list_offsets[p.list_count] : 0;
  for (uint32_t j = 0; j < p.list_count; ++j)
    if (p.list_offsets[j] > p.list_offsets[j + 1] || (j == 0 && p.list_offsets[0] != 0))
      throw GpuError(TM_ERR_INVALID_ARGUMENT, "list offsets must start at 0 and not decrease (list " + std::to_string(j) + ")");
  for (uint64_t k = 0; k < entries; ++k)  // the kernel reads these pixels: never outside the frame
    if (p.list_pixels[k] >= p.pixels_per_frame)
      throw GpuError(TM_ERR_INVALID_ARGUMENT, "list pixel " + std::to_string(p.list_pixels[k]) + " is outside the frame of " +
                                                  std::to_string(p.pixels_per_frame) + " pixels");
  const uint64_t row = TM_STEM_FRAME_SUMS_FIXED + p.list_count;
  need_output(c, frames * row * sizeof(uint64_t));
  DeviceBuffer offsets((p.list_count + 1) * sizeof(uint64_t)), pixels((entries ? entries : 1) * sizeof(uint32_t));
  if (p.list_count) offsets.upload(p.list_offsets, (p.list_count + 1) * sizeof(uint64_t));
  else offsets.zero();
  pixels.upload(p.list_pixels, entries * sizeof(uint32_t));
  const unsigned width = dtype_width(c.dtype);
  for (const Chunk& piece : plan_chunks(c.element_count, p.pixels_per_frame, p.pixels_per_frame * width, chunk_bytes())) {
    const Input in = input_piece(c, resident, piece.first, piece.count, width);
    const uint64_t nf = piece.count / p.pixels_per_frame;
    DeviceBuffer sums(nf * row * sizeof(uint64_t));
    sums.zero();
    TM_GPU_LAUNCH(frame_sums_kernel, grid_for(nf * kFrameSegments, 64), 64, in.ptr, nf, unsigned(c.dtype),
                  p.pixels_per_frame, unsigned(p.cols), unsigned(p.list_count),
                  static_cast<const uint64_t*>(offsets.get<uint64_t>()), static_cast<const uint32_t*>(pixels.get<uint32_t>()),
                  unsigned(p.com_list), unsigned(p.flags), sums.get<u64>());
    finish_launch("frame_sums_kernel");
    sums.download(static_cast<uint64_t*>(c.output) + (piece.first / p.pixels_per_frame) * row, nf * row * sizeof(uint64_t));
  }
}

void run_compact_sums(const tm_kernel_call_v1& c, const unsigned char* resident) {
  if (const std::string problem = compact_sums_problem(c); !problem.empty()) throw GpuError(TM_ERR_INVALID_ARGUMENT, problem);
  const auto& p = *static_cast<const tm_stem_compact_sums_params_v1*>(c.params);
  const uint64_t jobs = p.position_count, row = TM_STEM_FRAME_SUMS_FIXED + p.list_count, pixels = p.pixels_per_frame;
  // Per job its page and page-local position (the directory is the host's), the key tables, and the image.
  std::vector<uint32_t> page(jobs), local(jobs);
  for (uint64_t i = 0; i < jobs; ++i) {
    page[i] = static_cast<uint32_t>(std::upper_bound(p.page_first + 1, p.page_first + p.page_count + 1, p.positions[i]) - (p.page_first + 1));
    local[i] = static_cast<uint32_t>(p.positions[i] - p.page_first[page[i]]);
  }
  DeviceBuffer job_page((jobs ? jobs : 1) * 4), job_local((jobs ? jobs : 1) * 4), lists((p.list_count ? pixels : 1) * 8),
      key_pixels((p.pixel_of_key ? pixels : 1) * 4), sums((jobs ? jobs : 1) * (row + 1) * 8),
      ranges((p.list_ranges && p.list_count ? 2 * p.list_count : 1) * 4);
  job_page.upload(page.data(), jobs * 4), job_local.upload(local.data(), jobs * 4);
  if (p.list_count) lists.upload(p.key_lists, pixels * 8);
  if (p.pixel_of_key) key_pixels.upload(p.pixel_of_key, pixels * 4);
  const bool ranged = p.list_ranges && p.list_count;
  if (ranged) ranges.upload(p.list_ranges, uint64_t{p.list_count} * 8);
  sums.zero();
  const Input in = input_piece(c, resident, 0, c.element_count, 1);
  TM_GPU_LAUNCH(compact_sums_kernel, grid_for(jobs * kFrameSegments, 64), 64, in.ptr, c.element_count, jobs,
                static_cast<const uint32_t*>(job_page.get<uint32_t>()), static_cast<const uint32_t*>(job_local.get<uint32_t>()), pixels,
                unsigned(p.cols), unsigned(p.key_bytes), unsigned(p.list_count),
                p.list_count ? static_cast<const uint64_t*>(lists.get<uint64_t>()) : nullptr,
                p.pixel_of_key ? static_cast<const uint32_t*>(key_pixels.get<uint32_t>()) : nullptr, unsigned(p.com_list),
                unsigned(p.flags), ranged ? static_cast<const uint32_t*>(ranges.get<uint32_t>()) : nullptr, sums.get<u64>());
  finish_launch("compact_sums_kernel");
  std::vector<uint64_t> rows(jobs * (row + 1));
  sums.download(rows.data(), rows.size() * 8);
  auto* out = static_cast<uint64_t*>(c.output);
  for (uint64_t i = 0; i < jobs; ++i) {
    if (rows[i * (row + 1) + row])
      throw GpuError(TM_ERR_INVALID_ARGUMENT, "stem.compact_sums: page " + std::to_string(page[i]) +
                                                  " breaks the contract at page-local position " + std::to_string(local[i]) +
                                                  " (counts, offsets or a key outside the frame)");
    std::memcpy(out + i * row, rows.data() + i * (row + 1), row * 8);
  }
}

void run_pattern_reduce(const tm_kernel_call_v1& c, const unsigned char* resident) {
  const auto& p = params_of<tm_stem_pattern_params_v1>(c);
  frame_count(c, p.pixels_per_frame);
  const uint64_t n = p.pixels_per_frame;
  need_output(c, n * (sizeof(uint64_t) + sizeof(uint32_t)));
  DeviceBuffer sums(n * sizeof(uint64_t)), maxima(n * sizeof(uint32_t));
  auto* host_sums = static_cast<uint64_t*>(c.output);
  auto* host_max = reinterpret_cast<uint32_t*>(host_sums + n);
  sums.upload(host_sums, n * sizeof(uint64_t));  // accumulated: start from the caller's values
  maxima.upload(host_max, n * sizeof(uint32_t));
  const unsigned width = dtype_width(c.dtype);
  for (const Chunk& piece : plan_chunks(c.element_count, n, n * width, chunk_bytes())) {
    const Input in = input_piece(c, resident, piece.first, piece.count, width);
    TM_GPU_LAUNCH(pattern_reduce_kernel, grid_for(n), kThreads, in.ptr, piece.count / n, unsigned(c.dtype), n,
                  sums.get<u64>(), maxima.get<uint32_t>());
    finish_launch("pattern_reduce_kernel");
  }
  sums.download(host_sums, n * sizeof(uint64_t));
  maxima.download(host_max, n * sizeof(uint32_t));
}

void run_colorize(const tm_kernel_call_v1& c, const unsigned char* resident) {
  const auto& p = params_of<tm_display_colorize_params_v1>(c);
  if (p.key_mode > TM_DISPLAY_KEY_MAGNITUDE) throw GpuError(TM_ERR_INVALID_ARGUMENT, "unknown key_mode");
  for (uint32_t i = 0; i < TM_DISPLAY_THRESHOLDS; ++i)
    if (p.thresholds[i] != p.thresholds[i] || (i && p.thresholds[i] < p.thresholds[i - 1]))
      throw GpuError(TM_ERR_INVALID_ARGUMENT, "thresholds must be non-decreasing and never NaN (threshold " +
                                                  std::to_string(i) + ")");
  const uint64_t counts_bytes = TM_DISPLAY_COLORIZE_COUNTS * sizeof(uint64_t);
  need_output(c, counts_bytes + c.element_count * 4);
  DeviceBuffer params(sizeof p), counts(counts_bytes);
  params.upload(&p, sizeof p);
  counts.zero();
  auto* rgba = static_cast<unsigned char*>(c.output) + counts_bytes;
  for (const Chunk& piece : plan_chunks(c.element_count, 1, 8, chunk_bytes() / 2)) {
    const Input in = input_piece(c, resident, piece.first, piece.count, 8);
    DeviceBuffer colours(piece.count * 4);
    TM_GPU_LAUNCH(colorize_kernel, grid_for(piece.count), kThreads, reinterpret_cast<const double*>(in.ptr), piece.count,
                  static_cast<const tm_display_colorize_params_v1*>(params.get<tm_display_colorize_params_v1>()),
                  counts.get<u64>(), colours.get());
    finish_launch("colorize_kernel");
    colours.download(rgba + piece.first * 4, piece.count * 4);
  }
  add_counts(counts, TM_DISPLAY_COLORIZE_COUNTS, static_cast<uint64_t*>(c.output));
}

void run_dequantize(const tm_kernel_call_v1& c, const unsigned char*) {
  const auto& p = params_of<tm_dequantize_ggml_params_v1>(c);
  const bool legacy = p.ggml_type < 64 && (kLegacyGgml & bit(p.ggml_type));
  const bool kquant = p.ggml_type < 64 && (kKQuants & bit(p.ggml_type));
  if (!legacy && !kquant)
    throw GpuError(TM_ERR_UNSUPPORTED, "no " TM_GPU_BACKEND_NAME " kernel for ggml type " + std::to_string(p.ggml_type));
  const uint64_t block = legacy ? 32 : 256, bytes = legacy ? legacy_block_bytes(p.ggml_type) : kquant_block_bytes(p.ggml_type);
  if (c.element_count % block)
    throw GpuError(TM_ERR_INVALID_ARGUMENT, std::to_string(c.element_count) + " elements are not whole " +
                                                std::to_string(block) + "-element blocks");
  need_output(c, c.element_count * sizeof(float));
  for (const Chunk& piece : plan_chunks(c.element_count, block, bytes, chunk_bytes())) {
    DeviceBuffer blocks(piece.count / block * bytes), out(piece.count * sizeof(float));
    blocks.upload(static_cast<const unsigned char*>(c.input) + piece.first / block * bytes, piece.count / block * bytes);
    if (legacy)
      TM_GPU_LAUNCH(dequantize_legacy_kernel, grid_for(piece.count), kThreads,
                    static_cast<const unsigned char*>(blocks.get()), piece.count, unsigned(p.ggml_type), out.get<float>());
    else
      TM_GPU_LAUNCH(dequantize_kquant_kernel, grid_for(piece.count), kThreads,
                    static_cast<const unsigned char*>(blocks.get()), piece.count, unsigned(p.ggml_type), out.get<float>());
    finish_launch("dequantize kernel");
    out.download(static_cast<float*>(c.output) + piece.first, piece.count * sizeof(float));
  }
}

// One partial per canonical block of 65,536 values (2,048 ggml blocks); pieces are whole canonical blocks.
void run_quant_moments(const tm_kernel_call_v1& c, const unsigned char*) {
  const auto& p = params_of<tm_dequantize_ggml_params_v1>(c);
  if (p.ggml_type != kQ4_0 && p.ggml_type != kQ8_0)
    throw GpuError(TM_ERR_UNSUPPORTED, "no " TM_GPU_BACKEND_NAME " quant.moments kernel for ggml type " + std::to_string(p.ggml_type));
  if (c.element_count % 32)
    throw GpuError(TM_ERR_INVALID_ARGUMENT, std::to_string(c.element_count) + " elements are not whole 32-element blocks");
  const uint64_t canonical = (c.element_count + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
  need_output(c, canonical * sizeof(tm_moments_partial_v1));
  const uint64_t bytes = legacy_block_bytes(p.ggml_type), per = TM_STATS_BLOCK_ELEMENTS / 32;
  auto* out = static_cast<tm_moments_partial_v1*>(c.output);
  for (const Chunk& piece : plan_chunks(c.element_count, TM_STATS_BLOCK_ELEMENTS, per * bytes, chunk_bytes())) {
    const uint64_t n = piece.count / 32, nc = (n + per - 1) / per;
    DeviceBuffer blocks(n * bytes), totals(nc * sizeof(QuantTotals)), partials(nc * sizeof(tm_moments_partial_v1));
    blocks.upload(static_cast<const unsigned char*>(c.input) + piece.first / 32 * bytes, n * bytes);
    totals.zero();
    const auto* in = static_cast<const unsigned char*>(blocks.get());
    TM_GPU_LAUNCH(quant_moments_blocks_kernel, grid_for(n), kThreads, in, n, unsigned(p.ggml_type), totals.get<QuantTotals>());
    finish_launch("quant_moments_blocks_kernel");
    TM_GPU_LAUNCH(quant_moments_finish_kernel, grid_for(nc, 64), 64, in, n, unsigned(p.ggml_type),
                  static_cast<const QuantTotals*>(totals.get<QuantTotals>()), nc, partials.get<tm_moments_partial_v1>());
    finish_launch("quant_moments_finish_kernel");
    partials.download(out + piece.first / TM_STATS_BLOCK_ELEMENTS, nc * sizeof(tm_moments_partial_v1));
  }
}

// ---- decode.bitshuffle_lz4 --------------------------------------------------------------------------------
// The message for chunk-relative failure f (the CPU decoder's wording where the facts are the same).
std::string chunk_failure_message(const ChunkFailure& f, uint64_t tail_elements) {
  const std::string at = "block " + std::to_string(f.block) + " (chunk byte " + std::to_string(f.offset) + ")";
  switch (f.code) {
    case kPrefixTruncated: return at + ": size prefix truncated (chunk ends at byte " + std::to_string(f.a) + ")";
    case kBlockOverruns:
      return at + ": says " + std::to_string(f.a) + " compressed bytes, only " + std::to_string(f.b) + " remain";
    case kTailMismatch:
      return "after " + std::to_string(f.block) + " blocks at chunk byte " + std::to_string(f.offset) + ", " +
             std::to_string(f.a) + " bytes remain where the " + std::to_string(tail_elements) + " raw tail elements need " +
             std::to_string(f.b);
    case kLz4Short: return at + ": LZ4 block decoded to " + std::to_string(f.a) + " bytes, expected " + std::to_string(f.b);
    case kLz4OffsetZero:
      return at + ": LZ4 match offset 0 at byte " + std::to_string(f.a) + " of the block (undefined in LZ4; refused)";
    default:
      return at + ": LZ4 error at byte " + std::to_string(f.a) + " decoding " + std::to_string(f.b) +
             " bytes (corrupt or truncated block)";
  }
}

// A chunk's header, read on the host: its block size in elements, or what is wrong (the CPU's wording).
std::string chunk_header(const unsigned char* chunk, uint64_t length, unsigned es, uint64_t chunk_elements, uint64_t* block_elements) {
  if (length < 12) return "header needs 12 bytes, chunk has " + std::to_string(length);
  const uint64_t total = load_be(chunk, 8), block_bytes = load_be(chunk + 8, 4);
  if (total != chunk_elements * es)
    return "header (byte 0) says " + std::to_string(total) + " uncompressed bytes, the frame has " + std::to_string(chunk_elements * es);
  if (block_bytes == 0 || block_bytes % es != 0 || (block_bytes / es) % 8 != 0)
    return "header (byte 8) block size " + std::to_string(block_bytes) + " bytes is not a positive multiple of 8 " +
           std::to_string(es) + "-byte elements";
  if (block_bytes > TM_BITSHUFFLE_LZ4_MAX_BLOCK_BYTES)
    return "header (byte 8) block size " + std::to_string(block_bytes) + " bytes is more than one LZ4 block can hold (" +
           std::to_string(TM_BITSHUFFLE_LZ4_MAX_BLOCK_BYTES) + "): a damaged header";
  *block_elements = block_bytes / es;
  return {};
}

// Decodes chunks [first, last) of the call (their headers checked) into the output (the device output when
// the call has one, else the host's), masked per the call; returns the first failure's message naming its
// chunk (and sets *failed to it), or "".
std::string decode_chunk_piece(const tm_kernel_call_v1& c, const tm_decode_bitshuffle_lz4_params_v1& p, unsigned es,
                               uint64_t first, uint64_t last, const std::vector<uint64_t>& block_elements,
                               const DecodeMasking& masking, uint64_t* failed_chunk, uint64_t* all_ones) {
  const uint64_t chunks = last - first, base = p.chunk_offsets[first], whole = p.chunk_elements - p.chunk_elements % 8;
  std::vector<uint64_t> offsets(chunks + 1), bases(chunks + 1, 0), per_chunk(chunks);
  for (uint64_t i = 0; i <= chunks; ++i) offsets[i] = p.chunk_offsets[first + i] - base;
  for (uint64_t i = 0; i < chunks; ++i) {
    per_chunk[i] = block_elements[first + i];
    bases[i + 1] = bases[i] + (whole + per_chunk[i] - 1) / per_chunk[i];
  }
  const uint64_t blocks = bases[chunks], out_bytes = chunks * p.chunk_elements * es;
  DeviceBuffer input(offsets[chunks]), dev_offsets((chunks + 1) * 8), dev_be(chunks * 8), dev_bases((chunks + 1) * 8),
      table((blocks ? blocks : 1) * sizeof(Lz4Block)), tails(chunks * 8), chunk_failures(chunks * sizeof(ChunkFailure)),
      block_failures((blocks ? blocks : 1) * sizeof(ChunkFailure)), failed(sizeof(unsigned)), scratch(out_bytes),
      out(state().device_output ? 0 : out_bytes);
  unsigned char* dst = state().device_output ? state().device_output + first * p.chunk_elements * es : out.get();
  input.upload(static_cast<const unsigned char*>(c.input) + base, offsets[chunks]);
  dev_offsets.upload(offsets.data(), (chunks + 1) * 8);
  dev_be.upload(per_chunk.data(), chunks * 8);
  dev_bases.upload(bases.data(), (chunks + 1) * 8);
  table.zero(), failed.zero();
  const auto* in = static_cast<const unsigned char*>(input.get());
  TM_GPU_LAUNCH(bslz4_walk_kernel, grid_for(chunks, 64), 64, in, static_cast<const uint64_t*>(dev_offsets.get<uint64_t>()), chunks,
                p.chunk_elements, es, static_cast<const uint64_t*>(dev_be.get<uint64_t>()),
                static_cast<const uint64_t*>(dev_bases.get<uint64_t>()), table.get<Lz4Block>(), tails.get<uint64_t>(),
                chunk_failures.get<ChunkFailure>(), failed.get<unsigned>());
  finish_launch("bslz4_walk_kernel");
  if (blocks) {
    TM_GPU_LAUNCH(bslz4_blocks_kernel, grid_for(blocks, 64), 64, in, static_cast<const Lz4Block*>(table.get<Lz4Block>()), blocks,
                  scratch.get(), block_failures.get<ChunkFailure>(), failed.get<unsigned>());
    finish_launch("bslz4_blocks_kernel");
  }
  unsigned failures = 0;
  failed.download(&failures, sizeof failures);
  if (failures) {
    // The CPU meets a chunk's failures in order: block k's size prefix, then its LZ4 data, then block k + 1.
    std::vector<ChunkFailure> walk(chunks), lz4(blocks);
    chunk_failures.download(walk.data(), chunks * sizeof(ChunkFailure));
    block_failures.download(lz4.data(), blocks * sizeof(ChunkFailure));
    for (uint64_t i = 0; i < chunks; ++i) {
      const ChunkFailure* f = walk[i].code != kChunkOk ? &walk[i] : nullptr;
      for (uint64_t b = bases[i]; b < bases[i + 1]; ++b)
        if (lz4[b].code != kChunkOk && (!f || lz4[b].block < f->block)) {
          f = &lz4[b];
          break;
        }
      if (f) {
        *failed_chunk = first + i;
        return "chunk " + std::to_string(first + i) + ": " + chunk_failure_message(*f, p.chunk_elements % 8);
      }
    }
  }
  const uint64_t n = chunks * p.chunk_elements;
  TM_GPU_LAUNCH(bslz4_unshuffle_kernel, grid_for(n), kThreads, in, static_cast<const unsigned char*>(scratch.get()), n,
                p.chunk_elements, es, static_cast<const uint64_t*>(dev_be.get<uint64_t>()),
                static_cast<const uint64_t*>(dev_bases.get<uint64_t>()), static_cast<const Lz4Block*>(table.get<Lz4Block>()),
                static_cast<const uint64_t*>(tails.get<uint64_t>()), dst);
  finish_launch("bslz4_unshuffle_kernel");
  if (masking.flags & TM_DECODE_ZERO_ALL_ONES) {
    DeviceBuffer count(sizeof(u64));
    count.zero();
    TM_GPU_LAUNCH(bslz4_zero_all_ones_kernel, grid_for(n), kThreads, dst, n, es, count.get<u64>());
    finish_launch("bslz4_zero_all_ones_kernel");
    u64 zeroed = 0;
    count.download(&zeroed, sizeof zeroed);
    *all_ones += zeroed;
  }
  if (masking.zero_element_count) {
    DeviceBuffer listed(masking.zero_element_count * sizeof(uint32_t));
    listed.upload(masking.zero_elements, masking.zero_element_count * sizeof(uint32_t));
    TM_GPU_LAUNCH(bslz4_zero_listed_kernel, grid_for(chunks * masking.zero_element_count), kThreads, dst, chunks,
                  p.chunk_elements, es, static_cast<const uint32_t*>(listed.get<uint32_t>()), masking.zero_element_count);
    finish_launch("bslz4_zero_listed_kernel");
  }
  if (!state().device_output) out.download(static_cast<unsigned char*>(c.output) + first * p.chunk_elements * es, out_bytes);
  return {};
}

// Pieces of whole chunks of at most chunk_bytes() compressed and decoded; headers are read on the host
// first, and a piece stops before a chunk whose header is wrong (a lower chunk's failure is reported first).
void decode_chunks(const tm_kernel_call_v1& c, const tm_decode_bitshuffle_lz4_params_v1& p, unsigned es,
                   const DecodeMasking& masking, uint64_t* failed, uint64_t* all_ones) {
  const auto* in = static_cast<const unsigned char*>(c.input);
  std::vector<uint64_t> block_elements(p.chunk_count, 0);
  const uint64_t limit = chunk_bytes(), decoded = p.chunk_elements * es;
  for (uint64_t first = 0; first < p.chunk_count;) {
    uint64_t last = first, compressed = 0;
    std::string header_problem;
    while (last < p.chunk_count) {
      const uint64_t length = p.chunk_offsets[last + 1] - p.chunk_offsets[last];
      if (last > first && (compressed + length > limit || (last - first + 1) * decoded > limit)) break;
      header_problem = chunk_header(in + p.chunk_offsets[last], length, es, p.chunk_elements, &block_elements[last]);
      if (!header_problem.empty()) break;
      compressed += length, ++last;
    }
    if (last > first) {
      const std::string problem = decode_chunk_piece(c, p, es, first, last, block_elements, masking, failed, all_ones);
      if (!problem.empty()) throw GpuError(TM_ERR_INVALID_ARGUMENT, problem);
    }
    if (!header_problem.empty()) {
      *failed = last;
      throw GpuError(TM_ERR_INVALID_ARGUMENT, "chunk " + std::to_string(last) + ": " + header_problem);
    }
    first = last;
  }
}

void run_decode_chunks(const tm_kernel_call_v1& c, const unsigned char*) {
  const unsigned es = dtype_width(c.dtype);
  const std::string problem =
      decode_call_problem(c, es, state().device_output ? state().device_output_bytes : c.output ? c.output_size : 0);
  if (!problem.empty()) throw GpuError(TM_ERR_INVALID_ARGUMENT, problem);
  const auto& p = *static_cast<const tm_decode_bitshuffle_lz4_params_v1*>(c.params);
  const DecodeMasking masking = decode_masking(c);
  uint64_t failed = UINT64_MAX, all_ones = 0;
  try {
    decode_chunks(c, p, es, masking, &failed, &all_ones);
  } catch (...) {
    if (failed != UINT64_MAX && masking.failed_chunk) *masking.failed_chunk = failed;
    throw;
  }
  if (masking.all_ones_zeroed) *masking.all_ones_zeroed += all_ones;
}
#if TM_GPU_HAS_FFT
// ---- stem.ssb_overlap -----------------------------------------------------------------------------------
// Pixels in batches whose complex64 planes fit one piece: spectra uploaded, C_b built, inverse FFTs, then the
// batch added to the float64 sums in pixel order.
void run_ssb(const tm_kernel_call_v1& c, const unsigned char*) {
  const auto& p = params_of<tm_stem_ssb_params_v1>(c);
  if (const std::string why = ssb_call_problem(c, p); !why.empty()) throw GpuError(TM_ERR_INVALID_ARGUMENT, why);
  const uint64_t R = p.rows, C = p.cols, N = R * C, B = p.pixels;
  const bool quadratic = p.variant == TM_SSB_QUADRATIC;
  auto upload = [](const void* host, uint64_t bytes) {
    DeviceBuffer d(bytes ? bytes : 8);
    if (host && bytes) d.upload(host, bytes);
    return d;
  };
  DeviceBuffer k = upload(p.pixel_k, 16 * B), dc = upload(p.dc, 8 * B), nu = upload(p.nu, 16 * N),
               e = upload(quadratic ? p.e_chi : nullptr, quadratic ? 16 * N : 0),
               rows = upload(quadratic ? p.row_factor : nullptr, quadratic ? 16 * B * R : 0),
               cols = upload(quadratic ? p.col_factor : nullptr, quadratic ? 16 * B * C : 0),
               terms = upload(quadratic ? nullptr : p.chi_terms, quadratic ? 0 : p.chi_term_count * sizeof(tm_ssb_chi_term_v1)),
               sums(32 * N);
  sums.zero();
  SsbArgs a{p.variant, quadratic ? 0u : p.chi_term_count, R, C, p.slice_stride, p.kmax2, k.get<double>(), dc.get<double>(),
            nu.get<double>(), e.get<double>(), rows.get<double>(), cols.get<double>(), terms.get<tm_ssb_chi_term_v1>()};
  const uint64_t batch = std::max<uint64_t>(1, std::min<uint64_t>(B, chunk_bytes() / (8 * N)));
  DeviceBuffer spectra(batch * p.slice_stride * 8), planes(batch * N * 8);
  GpuFft fft(R, C, batch);
  for (uint64_t first = 0; first < B; first += batch) {
    const uint64_t count = std::min(batch, B - first);
    spectra.upload(static_cast<const float*>(c.input) + 2 * first * p.slice_stride, count * p.slice_stride * 8);
    TM_GPU_LAUNCH(ssb_build_kernel, grid_for(count * N), kThreads, static_cast<const float*>(spectra.get<float>()), a, first,
                  count, planes.get<float>());
    finish_launch("ssb_build_kernel");
    fft.inverse(planes.get<float>());  // planes past `count` hold the last batch's values: transformed, never read
    check(gpuDeviceSynchronize(), "the inverse FFTs");
    TM_GPU_LAUNCH(ssb_reduce_kernel, grid_for(N), kThreads, static_cast<const float*>(planes.get<float>()), count, N,
                  sums.get<double>());
    finish_launch("ssb_reduce_kernel");
  }
  sums.download(c.output, 32 * N);
}
#endif

// ---- the table ------------------------------------------------------------------------------------------
tm_unavailable_reason reason_for(gpuError_t e) {
  if (e == gpuErrorNoDevice) return TM_REASON_NO_DEVICE;
  if (e == gpuErrorInsufficientDriver) {
    int driver = 0;
    (void)gpuDriverGetVersion(&driver);
    return driver == 0 ? TM_REASON_NO_DRIVER : TM_REASON_DRIVER_TOO_OLD;
  }
  return TM_REASON_NO_DRIVER;
}

tm_status init(tm_unavailable_reason* reason, tm_message* msg) {
  *reason = TM_AVAILABLE;
  int count = 0;
  const gpuError_t e = gpuGetDeviceCount(&count);
  if (e != gpuSuccess || count <= 0) {
    int driver = 0, runtime = 0;
    (void)gpuDriverGetVersion(&driver);
    (void)gpuRuntimeGetVersion(&runtime);
    *reason = e == gpuSuccess ? TM_REASON_NO_DEVICE : reason_for(e);
    write_message(msg, std::string(TM_GPU_API_NAME) + " reports " +
                           (e == gpuSuccess ? std::string("no device")
                                            : std::string(gpuGetErrorName(e)) + " (" + gpuGetErrorString(e) + ")") +
                           "; driver version " + std::to_string(driver) + ", runtime version " + std::to_string(runtime));
    return TM_OK;  // listed as unavailable with the reason
  }
  int driver = 0;
  (void)gpuDriverGetVersion(&driver);
  for (int i = 0; i < count; ++i) {
    gpuDeviceProp_t p;
    if (gpuGetDeviceProperties(&p, i) != gpuSuccess) continue;
    DeviceRecord d;
    // The architecture the kernels were built for must match: CUDA's compute capability, HIP's gfx name.
#if defined(TM_GPU_HIP)
    const std::string arch = p.gcnArchName;
#else
    const std::string arch = "sm_" + std::to_string(p.major) + std::to_string(p.minor);
#endif
    d.name = std::string(p.name) + " (" + arch + ")";
    d.memory = p.totalGlobalMem;
    d.driver = std::to_string(driver);
    d.id = std::string(TM_GPU_BACKEND_NAME) + ":" + std::to_string(i) + ":" + p.name + ":" + arch;
    state().devices.push_back(d);
  }
  state().ready = true;
  return TM_OK;
}

void shutdown() {
  for (const auto& [handle, r] : state().residents) free_resident(r);
  state().residents.clear();
  state().devices.clear();
  state().ready = false;
}

uint32_t device_count() { return static_cast<uint32_t>(state().devices.size()); }

tm_status device_info(uint32_t index, tm_device_info_v1* out) {
  if (index >= device_count() || !out) return TM_ERR_INVALID_ARGUMENT;
  const DeviceRecord& d = state().devices[index];
  const uint32_t caller_size = out->struct_size;
  tm_device_info_v1 info{};
  info.struct_size = sizeof info;
  info.kind = TM_GPU_DEVICE_KIND;
  info.name = d.name.c_str();
  info.id = d.id.c_str();
  info.memory_bytes = d.memory;
  info.max_allocation_bytes = d.memory;
  info.max_buffer_binding_bytes = d.memory;
  info.features = kFeatures;
  info.host_link_bytes_per_s = TM_GPU_LINK_BYTES_PER_S;
  info.driver_version = d.driver.c_str();
  // A caller built before driver_version gets the fields it knows.
  std::memcpy(out, &info, caller_size && caller_size < sizeof info ? caller_size : sizeof info);
  if (caller_size && caller_size < sizeof info) out->struct_size = caller_size;
  return TM_OK;
}

uint32_t kernel_count() { return kKernelCount; }

tm_status kernel_info(uint32_t index, tm_kernel_cap_v1* out) {
  if (index >= kKernelCount || !out) return TM_ERR_INVALID_ARGUMENT;
  *out = tm_kernel_cap_v1{};
  out->struct_size = sizeof *out;
  out->op = kKernels[index].op;
  out->dtype_mask = kKernels[index].mask;
#if defined(TM_GPU_CUDA)
  // Without libcufft the SSB kernel takes nothing, so the planner places SSB elsewhere (reported).
  if (out->op == TM_OP_STEM_SSB_OVERLAP && !cufft().missing.empty()) out->dtype_mask = 0;
#endif
  out->required_features = kFeatures & ~TM_FEATURE_F16;
  out->precision = kKernels[index].precision;
  out->tolerance = kKernels[index].tolerance;
  out->workspace_fixed_bytes = 2 * kChunkBytes;
  return TM_OK;
}

template <class F>
tm_status guarded(tm_message* msg, F f) {
  std::lock_guard<std::mutex> lock(state().mutex);
  try {
    f();
    return TM_OK;
  } catch (const GpuError& e) {
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

// A buffer from upload or allocate on `device` (`field` names the call's field in the refusal).
const Resident& resident_buffer(uint64_t handle, uint32_t device, const char* field) {
  auto it = state().residents.find(handle);
  if (it == state().residents.end() || it->second.device != device)
    throw GpuError(TM_ERR_INVALID_ARGUMENT, std::string(field) + " " + std::to_string(handle) +
                                                " is not a buffer on device " + std::to_string(device));
  return it->second;
}

void select_device(uint32_t index) {
  if (index >= device_count())
    throw GpuError(TM_ERR_INVALID_ARGUMENT, "no " TM_GPU_BACKEND_NAME " device " + std::to_string(index));
  if (state().current_device != static_cast<int>(index)) {
    check(gpuSetDevice(static_cast<int>(index)), "set device");
    state().current_device = static_cast<int>(index);
  }
}

tm_status run(const tm_kernel_call_v1* call, tm_message* msg) {
  return guarded(msg, [&] {
    if (!call || !state().ready) throw GpuError(TM_ERR_INVALID_ARGUMENT, "no call, or the backend is unavailable");
    if (call->kernel_index >= kKernelCount || kKernels[call->kernel_index].op != call->op)
      throw GpuError(TM_ERR_INVALID_ARGUMENT, "kernel " + std::to_string(call->kernel_index) + " does not run op " +
                                                  std::to_string(call->op));
    const KernelEntry& k = kKernels[call->kernel_index];
    if (!tm_op_takes_format(call->op) && (static_cast<unsigned>(call->dtype) >= 64 || !(k.mask & bit(call->dtype))))
      throw GpuError(TM_ERR_UNSUPPORTED, "no " TM_GPU_BACKEND_NAME " kernel for dtype " + std::to_string(call->dtype));
    select_device(call->device_index);
    const unsigned char* resident = nullptr;
    const bool has_residency_fields =
        call->struct_size >= offsetof(tm_kernel_call_v1, input_offset) + sizeof call->input_offset;
    const bool reads_resident = has_residency_fields && call->input_buffer && !tm_op_takes_format(call->op) &&
                                call->op != TM_OP_DECODE_BITSHUFFLE_LZ4;
    if (call->element_count && !call->input && !reads_resident) throw GpuError(TM_ERR_INVALID_ARGUMENT, "null input");
    if (reads_resident) {
      const Resident& r = resident_buffer(call->input_buffer, call->device_index, "input_buffer");
      const uint64_t bytes = element_bytes(*call);
      if (call->input_offset % 65536 || call->input_offset > r.bytes || bytes > r.bytes - call->input_offset)
        throw GpuError(TM_ERR_INVALID_ARGUMENT, "the call reads outside its resident copy (offset " +
                                                    std::to_string(call->input_offset) + ", " + std::to_string(bytes) +
                                                    " bytes of " + std::to_string(r.bytes) + ")");
      resident = r.ptr + call->input_offset;
    }
    // A device output (the device-output extension): only decode.bitshuffle_lz4 writes one.
    struct DeviceOutput {
      DeviceOutput(unsigned char* p, uint64_t n) { state().device_output = p, state().device_output_bytes = n; }
      ~DeviceOutput() { state().device_output = nullptr, state().device_output_bytes = 0; }
    };
    unsigned char* out_ptr = nullptr;
    uint64_t out_bytes = 0;
    if (call->struct_size >= offsetof(tm_kernel_call_v1, output_offset) + sizeof call->output_offset && call->output_buffer) {
      if (call->op != TM_OP_DECODE_BITSHUFFLE_LZ4)
        throw GpuError(TM_ERR_INVALID_ARGUMENT, "op " + std::to_string(call->op) + " does not write to a device buffer");
      const Resident& r = resident_buffer(call->output_buffer, call->device_index, "output_buffer");
      if (call->output_offset % 65536 || call->output_offset > r.bytes)
        throw GpuError(TM_ERR_INVALID_ARGUMENT, "output_offset " + std::to_string(call->output_offset) +
                                                    " is not a multiple of 65536 inside the buffer's " + std::to_string(r.bytes) + " bytes");
      out_ptr = r.ptr + call->output_offset, out_bytes = r.bytes - call->output_offset;
    }
    const DeviceOutput device_output(out_ptr, out_bytes);
    if (call->element_count) k.run(*call, resident);
  });
}

tm_status upload(uint32_t device_index, const void* data, uint64_t bytes, uint64_t* buffer, tm_message* msg) {
  return guarded(msg, [&] {
    if (!state().ready || !data || !buffer || bytes == 0) throw GpuError(TM_ERR_INVALID_ARGUMENT, "nothing to upload");
    select_device(device_index);
    DeviceBuffer copy(bytes);
    copy.upload(data, bytes);
    *buffer = state().next_handle++;
    state().residents.emplace(*buffer, Resident{device_index, copy.release(), bytes});
  });
}

tm_status allocate(uint32_t device_index, uint64_t bytes, uint64_t* buffer, tm_message* msg) {
  return guarded(msg, [&] {
    if (!state().ready || !buffer || bytes == 0) throw GpuError(TM_ERR_INVALID_ARGUMENT, "nothing to allocate");
    select_device(device_index);
    DeviceBuffer space(bytes);
    space.zero();
    *buffer = state().next_handle++;
    state().residents.emplace(*buffer, Resident{device_index, space.release(), bytes});
  });
}

void release(uint64_t buffer) {
  std::lock_guard<std::mutex> lock(state().mutex);
  auto it = state().residents.find(buffer);
  if (it == state().residents.end()) return;
  free_resident(it->second);
  state().residents.erase(it);
}

const tm_backend_v1 kTable = {
    TM_PLUGIN_ABI_VERSION, sizeof(tm_backend_v1), TM_GPU_BACKEND_NAME, TM_GPU_BACKEND_DESCRIPTION,
    init, shutdown, device_count, device_info, kernel_count, kernel_info, run, upload, release, allocate,
};

}  // namespace
}  // namespace tmorph::gpu

extern "C" TM_PLUGIN_EXPORT const tm_backend_v1* tensormorph_backend_entry(uint32_t abi_version) {
  return abi_version == TM_PLUGIN_ABI_VERSION ? &tmorph::gpu::kTable : nullptr;
}
