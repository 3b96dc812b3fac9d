#include "vk_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tensormorph/contract_math.h"
#include "tensormorph/op_contracts.h"
#include "vk_error.h"

namespace tmorph::vk {

namespace {

// Elements per chunk are kept below 2^31 so that every index in a shader fits a uint.
constexpr uint64_t kMaxChunkElements = uint64_t{1} << 31;
constexpr uint32_t kGroupSize = 256;  // local_size_x of the streaming shaders

void require(bool ok, const std::string& what) {
  if (!ok) throw VkError(TM_ERR_INVALID_ARGUMENT, what);
}

// Elements per chunk: the chunk's bytes, a multiple of `multiple` elements (at least one multiple).
uint64_t chunk_elements(const Device& device, uint32_t width, uint64_t multiple) {
  uint64_t n = std::min(chunk_bytes(device.physical()) / width, kMaxChunkElements - multiple);
  return std::max<uint64_t>(multiple, n / multiple * multiple);
}

// Workgroups for a grid-stride pass over n elements: enough to fill a device, few enough that each
// invocation loops over several elements.
uint32_t stream_groups(const Device& device, uint64_t n) {
  const uint64_t wanted = (n + kGroupSize * 16 - 1) / (kGroupSize * 16);
  return static_cast<uint32_t>(std::clamp<uint64_t>(wanted, 1, std::min<uint64_t>(4096, device.physical().max_workgroup_count_x)));
}

// 32-bit counts of the last launch added into 64-bit totals.
void add_counts(const Device& device, uint64_t* totals, size_t slots) {
  const auto* c = static_cast<const uint32_t*>(device.results());
  for (size_t i = 0; i < slots; ++i) totals[i] += c[i];
}

// The pieces of a call's input as the shaders read them, in order: host data copied chunk by chunk into
// the Input buffer, or a resident copy's chunks read where they are. Every piece holds a multiple of
// `multiple` elements (but the last), so moments pieces start on canonical blocks.
class InputPieces {
 public:
  struct Piece {
    uint64_t first = 0, count = 0;  // elements of the call
    Binding binding;                // where the shader reads them
    uint64_t upload_bytes = 0;      // what the launch must copy from Staging first
  };

  InputPieces(Device& device, const tm_kernel_call_v1& call, uint32_t width, uint64_t multiple, const Resident* resident)
      : device_(device), call_(call), width_(width), resident_(resident) {
    per_chunk_ = chunk_elements(device, width, multiple);
  }

  // Starts again from the first element (a second pass). A host tensor that fits one chunk is not
  // copied again.
  void rewind() { next_ = 0; }

  bool next(Piece* piece) {
    const uint64_t n = call_.element_count;
    if (next_ >= n) return false;
    piece->first = next_;
    if (resident_) {
      const uint64_t pos = call_.input_offset + next_ * width_;
      const uint64_t within = pos % resident_->chunk_bytes;
      piece->count = std::min(n - next_, (resident_->chunk_bytes - within) / width_);
      piece->binding = {&resident_->chunks.at(pos / resident_->chunk_bytes), within};
      piece->upload_bytes = 0;
    } else {
      piece->count = std::min(per_chunk_, n - next_);
      const bool reuse = uploaded_once_ && piece->count == n;
      piece->upload_bytes =
          reuse ? 0 : device_.write_input(static_cast<const uint8_t*>(call_.input) + next_ * width_, piece->count * width_);
      uploaded_once_ = true;
      piece->binding = {&device_.buffer(Slot::Input, 0), 0};
    }
    next_ += piece->count;
    return true;
  }

 private:
  Device& device_;
  const tm_kernel_call_v1& call_;
  uint32_t width_;
  const Resident* resident_;
  uint64_t per_chunk_ = 0;
  uint64_t next_ = 0;
  bool uploaded_once_ = false;
};

// One counting pass of a streaming shader over every piece of the input: binding 0 the piece, binding 1
// `slots` 32-bit counters zeroed for each launch, binding 2 `extra` when given; push constants
// {elements of the piece, parameter} (a pipeline declaring 4 bytes reads the first). Each launch's
// counts are added into totals[0, slots).
void count_pass(Device& device, InputPieces& pieces, const Pipeline& pipeline, uint64_t slots, const Buffer* extra,
                uint32_t parameter, uint64_t* totals) {
  InputPieces::Piece piece;
  while (pieces.next(&piece)) {
    const Buffer& counts = device.buffer(Slot::Output, slots * 4);
    const uint32_t push[2] = {static_cast<uint32_t>(piece.count), parameter};
    Dispatch d;
    d.pipeline = &pipeline;
    d.bindings = {piece.binding, {&counts, 0}};
    if (extra) d.bindings.push_back({extra, 0});
    d.push = push;
    d.groups = stream_groups(device, piece.count);
    d.upload_bytes = piece.upload_bytes;
    d.zero_first = {{&counts, slots * 4}};
    d.result_bytes = slots * 4;
    device.run(d);
    add_counts(device, totals, slots);
  }
}

}  // namespace

Resident make_resident(Device& device, uint32_t device_index, const void* data, uint64_t bytes) {
  Resident r;
  r.device_index = device_index;
  r.bytes = bytes;
  constexpr uint64_t kAlign = 262144;
  r.chunk_bytes = std::max(kAlign, chunk_bytes(device.physical()) / kAlign * kAlign);
  try {
    for (uint64_t first = 0; first < bytes; first += r.chunk_bytes)
      r.chunks.push_back(device.make_resident(static_cast<const uint8_t*>(data) + first, std::min(r.chunk_bytes, bytes - first)));
  } catch (...) {
    release_resident(device, r);
    throw;
  }
  return r;
}

void release_resident(Device& device, Resident& resident) {
  for (Buffer& b : resident.chunks) device.release(b);
  resident.chunks.clear();
}

uint32_t dtype_width(tm_dtype dt) {
  switch (dt) {
    case TM_DTYPE_F32: case TM_DTYPE_I32: case TM_DTYPE_U32: return 4;
    case TM_DTYPE_F16: case TM_DTYPE_BF16: case TM_DTYPE_I16: case TM_DTYPE_U16: return 2;
    case TM_DTYPE_F8_E4M3FN: case TM_DTYPE_F8_E5M2: case TM_DTYPE_I8: case TM_DTYPE_U8: case TM_DTYPE_BOOL: return 1;
    default: throw VkError(TM_ERR_UNSUPPORTED, "the Vulkan kernels take no dtype " + std::to_string(dt));
  }
}

uint64_t chunk_bytes(const PhysicalDevice& device) {
  uint64_t bytes = kDefaultChunkBytes;
  if (const char* env = std::getenv("TENSORMORPH_VULKAN_CHUNK_BYTES"); env && *env) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (end && *end == 0 && v >= 4096) bytes = v;
  }
  bytes = std::min(bytes, device.max_storage_buffer_range);
  if (device.max_allocation_bytes) bytes = std::min(bytes, device.max_allocation_bytes);
  return bytes / 4 * 4;
}

void run_moments(Device& device, const tm_kernel_call_v1& call, const Resident* resident) {
  const uint32_t width = dtype_width(call.dtype);
  const uint64_t n = call.element_count;
  const uint64_t blocks = (n + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
  require(call.output_size >= blocks * sizeof(tm_moments_partial_v1),
          "stats.moments: output holds " + std::to_string(call.output_size) + " bytes, " +
              std::to_string(blocks) + " block partials need " + std::to_string(blocks * sizeof(tm_moments_partial_v1)));
  static_assert(sizeof(tm_moments_partial_v1) == 144, "the shader's Partial is 18 eight-byte fields");
  const Pipeline& pipeline = device.pipeline("moments", {static_cast<uint32_t>(call.dtype), width}, 2, 8);
  auto* out = static_cast<tm_moments_partial_v1*>(call.output);
  InputPieces pieces(device, call, width, TM_STATS_BLOCK_ELEMENTS, resident);
  InputPieces::Piece piece;
  while (pieces.next(&piece)) {
    const uint64_t chunk_blocks = (piece.count + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
    const Buffer& partials = device.buffer(Slot::Output, chunk_blocks * sizeof(tm_moments_partial_v1));
    const uint64_t max_groups = device.physical().max_workgroup_count_x;
    uint64_t upload = piece.upload_bytes;
    for (uint64_t b = 0; b < chunk_blocks; b += max_groups) {
      const uint32_t push[2] = {static_cast<uint32_t>(piece.count), static_cast<uint32_t>(b)};
      Dispatch d;
      d.pipeline = &pipeline;
      d.bindings = {piece.binding, {&partials, 0}};
      d.push = push;
      d.groups = static_cast<uint32_t>(std::min(max_groups, chunk_blocks - b));
      d.upload_bytes = upload;
      d.result_bytes = chunk_blocks * sizeof(tm_moments_partial_v1);
      device.run(d);
      upload = 0;
    }
    std::memcpy(out + piece.first / TM_STATS_BLOCK_ELEMENTS, device.results(),
                chunk_blocks * sizeof(tm_moments_partial_v1));
  }
}

void run_histogram(Device& device, const tm_kernel_call_v1& call, const Resident* resident) {
  const uint32_t width = dtype_width(call.dtype);
  require(call.params && call.params_size >= sizeof(tm_histogram_params_v1), "stats.histogram: missing params");
  const auto& params = *static_cast<const tm_histogram_params_v1*>(call.params);
  require(params.bins >= 1 && params.bins <= 65536 && params.edges, "stats.histogram: bins must be 1..65536 with edges");
  const uint64_t slots = uint64_t{params.bins} + 2;
  require(call.output_size >= slots * sizeof(uint64_t), "stats.histogram: output smaller than bins + 2 counts");
  // Shared-memory counting needs the slots to fit the shader's table and the device's shared memory.
  const bool privatised = slots <= 4096 && device.physical().max_shared_memory_bytes >= 4096 * 4;
  const Pipeline& pipeline =
      device.pipeline("histogram", {static_cast<uint32_t>(call.dtype), width, privatised ? 1u : 0u}, 3, 8);
  Buffer& edges = device.buffer(Slot::Aux, (slots - 1) * sizeof(double));
  std::memcpy(edges.mapped, params.edges, (slots - 1) * sizeof(double));
  InputPieces pieces(device, call, width, 4, resident);
  count_pass(device, pieces, pipeline, slots, &edges, params.bins, static_cast<uint64_t*>(call.output));
}

void run_bitpattern_histogram(Device& device, const tm_kernel_call_v1& call, const Resident* resident) {
  const uint32_t width = dtype_width(call.dtype);
  require(width <= 2, "stats.bitpattern_histogram: only 8- and 16-bit dtypes");
  const uint64_t slots = uint64_t{1} << (8 * width);
  require(call.output_size >= slots * sizeof(uint64_t), "stats.bitpattern_histogram: output smaller than the pattern count");
  const Pipeline& pipeline = device.pipeline("bitpattern", {static_cast<uint32_t>(call.dtype), width}, 2, 4);
  InputPieces pieces(device, call, width, 4, resident);
  count_pass(device, pieces, pipeline, slots, nullptr, 0, static_cast<uint64_t*>(call.output));
}

namespace {

// The value whose order key (radix_count.comp) is `key`.
double value_of_key(tm_dtype dt, uint32_t key) {
  if (dt == TM_DTYPE_F32) {
    const uint32_t bits = (key & 0x80000000u) ? (key & 0x7FFFFFFFu) : ~key;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  if (dt == TM_DTYPE_I32) return static_cast<double>(static_cast<int32_t>(key ^ 0x80000000u));
  return static_cast<double>(key);
}

// Passes of radix_count.comp over the whole input: PASS 0 counts top-16-bit buckets into totals
// (65,536 slots); PASS 1 the low 16 bits of the keys in each of `targets` buckets (65,536 per target).
class RadixCounter {
 public:
  RadixCounter(Device& device, const tm_kernel_call_v1& call, const Resident* resident)
      : device_(device), call_(call), pieces_(device, call, 4, 4, resident) {}

  void count(uint32_t pass, const std::vector<uint32_t>& targets, std::vector<uint64_t>* totals) {
    const uint64_t slots = pass == 0 ? 65536 : 65536 * targets.size();
    totals->assign(slots, 0);
    const Pipeline& pipeline = device_.pipeline("radix_count", {static_cast<uint32_t>(call_.dtype), 4u, pass}, 3, 8);
    Buffer& target_buffer = device_.buffer(Slot::Aux, std::max<size_t>(targets.size(), 1) * 4);
    if (!targets.empty()) std::memcpy(target_buffer.mapped, targets.data(), targets.size() * 4);
    pieces_.rewind();
    count_pass(device_, pieces_, pipeline, slots, &target_buffer, static_cast<uint32_t>(targets.size()), totals->data());
  }

 private:
  Device& device_;
  const tm_kernel_call_v1& call_;
  InputPieces pieces_;
};

// Targets refined per PASS 1 launch: 16 buckets x 65,536 counts = 4 MiB of counters.
constexpr size_t kTargetsPerPass = 16;

}  // namespace

void run_quantiles(Device& device, const tm_kernel_call_v1& call, const Resident* resident) {
  require(call.dtype == TM_DTYPE_F32 || call.dtype == TM_DTYPE_I32 || call.dtype == TM_DTYPE_U32,
          "stats.quantiles: the Vulkan kernel takes f32, i32 and u32");
  require(call.params && call.params_size >= sizeof(tm_quantiles_params_v1), "stats.quantiles: missing params");
  const auto& params = *static_cast<const tm_quantiles_params_v1*>(call.params);
  require(call.output_size >= uint64_t{params.count} * sizeof(tm_quantile_value_v1),
          "stats.quantiles: output smaller than one value per probability");
  require(params.count == 0 || params.probabilities, "stats.quantiles: no probabilities");
  auto* out = static_cast<tm_quantile_value_v1*>(call.output);

  RadixCounter counter(device, call, resident);
  std::vector<uint64_t> top;
  counter.count(0, {}, &top);
  uint64_t n = 0;
  std::vector<uint64_t> below(65537, 0);  // below[b]: finite keys in buckets < b
  for (size_t b = 0; b < 65536; ++b) below[b + 1] = below[b] + top[b];
  n = below[65536];
  if (n == 0) {
    for (uint32_t q = 0; q < params.count; ++q) out[q] = {NAN, NAN, NAN, 0};
    return;
  }
  // The ranks every quantile reads, and the bucket of each.
  const std::vector<uint64_t> ranks = ranks_read(params.probabilities, params.count, n);
  auto bucket_of = [&](uint64_t rank) {
    return static_cast<uint32_t>(std::upper_bound(below.begin(), below.end(), rank) - below.begin() - 1);
  };
  std::vector<uint32_t> buckets;
  for (uint64_t r : ranks) buckets.push_back(bucket_of(r));
  buckets.erase(std::unique(buckets.begin(), buckets.end()), buckets.end());  // ranks sorted: buckets sorted

  std::vector<double> rank_value(ranks.size());
  std::vector<uint64_t> low;
  for (size_t first = 0; first < buckets.size(); first += kTargetsPerPass) {
    const std::vector<uint32_t> targets(buckets.begin() + first,
                                        buckets.begin() + std::min(buckets.size(), first + kTargetsPerPass));
    counter.count(1, targets, &low);
    for (size_t i = 0; i < ranks.size(); ++i) {
      const uint32_t b = bucket_of(ranks[i]);
      const auto t = std::lower_bound(targets.begin(), targets.end(), b);
      if (t == targets.end() || *t != b) continue;
      const uint64_t* c = low.data() + (t - targets.begin()) * 65536;
      uint64_t seen = below[b];
      uint32_t lo16 = 0;
      for (; lo16 < 65535; ++lo16) {
        if (seen + c[lo16] > ranks[i]) break;
        seen += c[lo16];
      }
      rank_value[i] = value_of_key(call.dtype, (b << 16) | lo16);
    }
  }
  for (uint32_t q = 0; q < params.count; ++q) {
    const double value = quantile_of(params.probabilities[q], n, [&](uint64_t r) {
      return rank_value[std::lower_bound(ranks.begin(), ranks.end(), r) - ranks.begin()];
    });
    out[q] = {value, value, value, n};
  }
}

}  // namespace tmorph::vk

namespace tmorph::vk {

void run_dequantize_ggml(Device& device, const tm_kernel_call_v1& call, const Resident*) {
  require(call.params && call.params_size >= sizeof(tm_dequantize_ggml_params_v1), "dequantize.ggml: missing params");
  const auto& params = *static_cast<const tm_dequantize_ggml_params_v1*>(call.params);
  require(params.ggml_type == 2 || params.ggml_type == 8, "dequantize.ggml: the Vulkan kernel decodes Q4_0 and Q8_0");
  require(call.element_count % 32 == 0, "dequantize.ggml: whole 32-value blocks only");
  require(call.output_size >= call.element_count * sizeof(float), "dequantize.ggml: output smaller than the values");
  const uint64_t block_bytes = params.ggml_type == 8 ? 34 : 18;
  // Blocks per launch: the input chunk and the float32 output (128 bytes per block) both fit a binding.
  const uint64_t limit = chunk_bytes(device.physical());
  const uint64_t per_chunk = std::max<uint64_t>(1, std::min(limit / block_bytes, limit / 128));
  const Pipeline& pipeline = device.pipeline("dequantize_ggml", {params.ggml_type}, 2, 8);
  const auto* in = static_cast<const uint8_t*>(call.input);
  auto* out = static_cast<float*>(call.output);
  const uint64_t blocks = call.element_count / 32;
  const uint64_t max_groups = device.physical().max_workgroup_count_x;
  for (uint64_t first = 0; first < blocks; first += per_chunk) {
    const uint64_t m = std::min(per_chunk, blocks - first);
    uint64_t upload = device.write_input(in + first * block_bytes, m * block_bytes);
    const Buffer& input = device.buffer(Slot::Input, 0);
    const Buffer& values = device.buffer(Slot::Output, m * 128);
    const uint64_t groups = (m * 32 + kGroupSize - 1) / kGroupSize;
    for (uint64_t g = 0; g < groups; g += max_groups) {
      const uint32_t push[2] = {static_cast<uint32_t>(m * 32), static_cast<uint32_t>(g * kGroupSize)};
      Dispatch d;
      d.pipeline = &pipeline;
      d.bindings = {{&input, 0}, {&values, 0}};
      d.push = push;
      d.groups = static_cast<uint32_t>(std::min(max_groups, groups - g));
      d.upload_bytes = upload;
      d.result_bytes = m * 128;
      device.run(d);
      upload = 0;
    }
    std::memcpy(out + first * 32, device.results(), m * 128);
  }
}

}  // namespace tmorph::vk

namespace tmorph::vk {

void run_stem_frame_sums(Device& device, const tm_kernel_call_v1& call, const Resident*) {
  require(call.params && call.params_size >= sizeof(tm_stem_frame_sums_params_v1), "stem.frame_sums: missing params");
  const auto& p = *static_cast<const tm_stem_frame_sums_params_v1*>(call.params);
  const uint32_t width = dtype_width(call.dtype);
  require(p.pixels_per_frame > 0 && p.cols > 0 && p.pixels_per_frame % p.cols == 0 && call.element_count % p.pixels_per_frame == 0,
          "stem.frame_sums: element_count must be whole frames of whole rows");
  require(p.list_count == 0 || (p.list_offsets && p.list_pixels && p.list_offsets[0] == 0), "stem.frame_sums: pixel lists missing");
  require(p.com_list == TM_STEM_ALL_PIXELS || p.com_list < p.list_count, "stem.frame_sums: com_list names no list");
  require((p.flags & ~TM_STEM_LISTS_ONLY) == 0, "stem.frame_sums: unknown flags");
  const uint64_t frames = call.element_count / p.pixels_per_frame;
  const uint64_t row_values = TM_STEM_FRAME_SUMS_FIXED + p.list_count;
  require(call.output_size >= frames * row_values * sizeof(uint64_t), "stem.frame_sums: output too small");
  // Pixel lists as runs of consecutive pixels inside a row (validated: increasing, inside the frame).
  std::vector<uint32_t> runs(p.list_count + 1, 0), pairs;
  for (uint32_t j = 0; j < p.list_count; ++j) {
    for (uint64_t i = p.list_offsets[j]; i < p.list_offsets[j + 1]; ++i) {
      const uint32_t k = p.list_pixels[i];
      require(k < p.pixels_per_frame && (i == p.list_offsets[j] || k > p.list_pixels[i - 1]),
              "stem.frame_sums: a list is not strictly increasing inside the frame");
      if (i > p.list_offsets[j] && k == p.list_pixels[i - 1] + 1 && k % p.cols != 0) ++pairs.back();
      else pairs.push_back(k), pairs.push_back(1);
    }
    runs[j + 1] = static_cast<uint32_t>(pairs.size() / 2);
  }
  runs.insert(runs.end(), pairs.begin(), pairs.end());
  Buffer& aux = device.buffer(Slot::Aux, runs.size() * 4);
  std::memcpy(aux.mapped, runs.data(), runs.size() * 4);

  const uint64_t frame_bytes = p.pixels_per_frame * width;
  const uint64_t limit = chunk_bytes(device.physical());
  require(frame_bytes <= limit && p.pixels_per_frame < (uint64_t{1} << 31), "stem.frame_sums: a frame exceeds one storage binding");
  // Frames per launch: the input chunk and its sums both fit a binding, and element indices fit 32 bits.
  const uint64_t per_chunk = std::max<uint64_t>(1, std::min({limit / frame_bytes, limit / (row_values * 8), (uint64_t{1} << 31) / p.pixels_per_frame}));
  const Pipeline& pipeline = device.pipeline("stem_frame_sums", {static_cast<uint32_t>(call.dtype), width}, 3, 24);
  const auto* in = static_cast<const uint8_t*>(call.input);
  auto* out = static_cast<uint64_t*>(call.output);
  const uint64_t max_groups = device.physical().max_workgroup_count_x;
  for (uint64_t first = 0; first < frames; first += per_chunk) {
    const uint64_t m = std::min(per_chunk, frames - first);
    uint64_t upload = device.write_input(in + first * frame_bytes, m * frame_bytes);
    const Buffer& input = device.buffer(Slot::Input, 0);
    const Buffer& sums = device.buffer(Slot::Output, m * row_values * 8);
    for (uint64_t g = 0; g < m; g += max_groups) {
      const uint32_t push[6] = {static_cast<uint32_t>(p.pixels_per_frame), p.cols, p.list_count, p.com_list,
                                (p.flags & TM_STEM_LISTS_ONLY) ? 1u : 0u, static_cast<uint32_t>(g)};
      Dispatch d;
      d.pipeline = &pipeline;
      d.bindings = {{&input, 0}, {&sums, 0}, {&aux, 0}};
      d.push = push;
      d.groups = static_cast<uint32_t>(std::min(max_groups, m - g));
      d.upload_bytes = upload;
      d.result_bytes = m * row_values * 8;
      device.run(d);
      upload = 0;
    }
    std::memcpy(out + first * row_values, device.results(), m * row_values * 8);
  }
}

}  // namespace tmorph::vk

namespace tmorph::vk {

void run_display_colorize(Device& device, const tm_kernel_call_v1& call, const Resident* resident) {
  require(call.dtype == TM_DTYPE_F64, "display.colorize: values must be f64");
  require(call.params && call.params_size >= sizeof(tm_display_colorize_params_v1), "display.colorize: missing params");
  const auto& p = *static_cast<const tm_display_colorize_params_v1*>(call.params);
  require(p.key_mode == TM_DISPLAY_KEY_VALUE || p.key_mode == TM_DISPLAY_KEY_MAGNITUDE, "display.colorize: unknown key mode");
  for (uint32_t i = 0; i < TM_DISPLAY_THRESHOLDS; ++i)
    require(!std::isnan(p.thresholds[i]) && (i == 0 || p.thresholds[i] >= p.thresholds[i - 1]),
            "display.colorize: thresholds must be non-decreasing and not NaN");
  const uint64_t n = call.element_count;
  require(call.output_size >= TM_DISPLAY_COLORIZE_COUNTS * sizeof(uint64_t) + n * 4, "display.colorize: output too small");
  // Aux: the thresholds as float64 ordinals (display_colorize.comp; entry 255 unused), then the 256 table
  // words. ord(x) = the bit pattern's magnitude, negated for a negative sign: monotone, -0 and +0 both 0.
  Buffer& aux = device.buffer(Slot::Aux, 256 * 8 + 256 * 4);
  std::vector<int64_t> th(256, 0);
  for (uint32_t i = 0; i < TM_DISPLAY_THRESHOLDS; ++i) {
    uint64_t bits;
    std::memcpy(&bits, &p.thresholds[i], 8);
    const int64_t mag = static_cast<int64_t>(bits & 0x7FFFFFFFFFFFFFFFull);
    th[i] = (bits >> 63) ? -mag : mag;
  }
  std::memcpy(aux.mapped, th.data(), 256 * 8);
  std::memcpy(static_cast<uint8_t*>(aux.mapped) + 256 * 8, p.table, 256 * 4);

  constexpr uint64_t kCountWords = 260;  // 259 counters and one word of padding before the colours
  const Pipeline& pipeline = device.pipeline("display_colorize", {}, 3, 8);
  auto* counts = static_cast<uint64_t*>(call.output);
  auto* rgba = static_cast<uint8_t*>(call.output) + TM_DISPLAY_COLORIZE_COUNTS * sizeof(uint64_t);
  InputPieces pieces(device, call, 8, 1, resident);
  InputPieces::Piece piece;
  while (pieces.next(&piece)) {
    const uint64_t out_bytes = (kCountWords + piece.count) * 4;
    const Buffer& out = device.buffer(Slot::Output, out_bytes);
    const uint32_t push[2] = {static_cast<uint32_t>(piece.count), p.key_mode};
    Dispatch d;
    d.pipeline = &pipeline;
    d.bindings = {piece.binding, {&out, 0}, {&aux, 0}};
    d.push = push;
    d.groups = stream_groups(device, piece.count);
    d.upload_bytes = piece.upload_bytes;
    d.zero_first = {{&out, kCountWords * 4}};
    d.result_bytes = out_bytes;
    device.run(d);
    add_counts(device, counts, TM_DISPLAY_COLORIZE_COUNTS);
    std::memcpy(rgba + 4 * piece.first, static_cast<const uint8_t*>(device.results()) + kCountWords * 4, piece.count * 4);
  }
}

}  // namespace tmorph::vk
