#include "cpu_backend.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "support/thread_pool.h"
#include "decode_chunks_kernel.h"
#include "dequant_kernel.h"
#include "packed_kernel.h"
#include "quant_moments_kernel.h"
#include "diff_kernel.h"
#include "diff_tiles_kernel.h"
#include "display_kernels.h"
#include "histogram_kernel.h"
#include "moments_kernel.h"
#include "quantile_kernels.h"
#include "radix_select.h"
#include "ssb_overlap_kernel.h"
#include "stem_kernels.h"
#include "tile_stats_kernel.h"
#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

namespace {

constexpr uint64_t bits(std::initializer_list<DType> types) {
  uint64_t m = 0;
  for (DType t : types) m |= 1ull << static_cast<uint32_t>(t);
  return m;
}

constexpr uint64_t kAllTypes = bits({DType::F64, DType::F32, DType::F16, DType::BF16, DType::F8_E4M3FN,
                                     DType::F8_E5M2, DType::I8, DType::I16, DType::I32, DType::I64, DType::U8,
                                     DType::U16, DType::U32, DType::U64, DType::BOOL});
constexpr uint64_t kNarrowTypes = bits({DType::F16, DType::BF16, DType::F8_E4M3FN, DType::F8_E5M2, DType::I8,
                                        DType::I16, DType::U8, DType::U16, DType::BOOL});
constexpr uint64_t kWide = bits({DType::F32, DType::I32, DType::U32, DType::F64, DType::I64, DType::U64});

enum KernelId : uint32_t {
  kMoments, kHistogram, kBitpattern, kQuantExact, kSketchF32, kSketchF64, kSampling, kDequantGgml, kDiffMoments, kBlockStats, kDequantPacked, kQuantMoments, kStemFrameSums,
  kStemPatternReduce, kDisplayColorize, kStemSsbOverlap, kDecodeBitshuffleLz4, kTileStats, kDiffTileStats, kStemCompactSums, kKernelCount
};

// Workspace fields that depend on the machine are filled in by init().
tm_kernel_cap_v1 kKernels[kKernelCount] = {
    {sizeof(tm_kernel_cap_v1), TM_OP_STATS_MOMENTS, kAllTypes, 0, 0, TM_PRECISION_EXACT, 0, 0, 0, nullptr, nullptr},
    {sizeof(tm_kernel_cap_v1), TM_OP_STATS_HISTOGRAM, kAllTypes, 0, 0, TM_PRECISION_EXACT, 0, 0, 0, nullptr, nullptr},
    {sizeof(tm_kernel_cap_v1), TM_OP_STATS_BITPATTERN_HISTOGRAM, kNarrowTypes, 0, 0, TM_PRECISION_EXACT, 0,
     65536 * 8, 0, nullptr, nullptr},
    {sizeof(tm_kernel_cap_v1), TM_OP_STATS_QUANTILES, kWide, 0, 0, TM_PRECISION_EXACT, 0, 0, 0, nullptr, nullptr},
    {sizeof(tm_kernel_cap_v1), TM_OP_STATS_QUANTILES, bits({DType::F32}), 0, 0, TM_PRECISION_BOUNDED, 0x1p-7,
     65536 * 8, 0, "quantiles.bitpattern_sketch",
     "one pass counting each value's top 16 bits (bf16 buckets); reports an interval that holds the exact "
     "quantile, relative width <= 2^-7"},
    {sizeof(tm_kernel_cap_v1), TM_OP_STATS_QUANTILES, bits({DType::F64}), 0, 0, TM_PRECISION_BOUNDED, 0x1p-4,
     65536 * 8, 0, "quantiles.bitpattern_sketch",
     "one pass counting each value's top 16 bits; reports an interval that holds the exact quantile, "
     "relative width <= 2^-4"},
    {sizeof(tm_kernel_cap_v1), TM_OP_STATS_QUANTILES, kWide, 0, 0, TM_PRECISION_DETERMINISTIC, 0, 0, 0,
     "quantiles.sampling",
     "exact quantiles of every s-th element, s chosen so the sample fits the memory budget; rank error "
     "typically ~1/sqrt(sample size), not guaranteed for data periodic in s"},
    // The format mask (ggml type ids, op_contracts.h) is filled in by init().
    {sizeof(tm_kernel_cap_v1), TM_OP_DEQUANTIZE_GGML, 0, 0, 0, TM_PRECISION_EXACT, 0, 0, 0, nullptr, nullptr},
    {sizeof(tm_kernel_cap_v1), TM_OP_DIFF_MOMENTS, bits({DType::F32}), 0, 0, TM_PRECISION_EXACT, 0, 0, 0, nullptr, nullptr},
    {sizeof(tm_kernel_cap_v1), TM_OP_GGML_BLOCK_STATS, 0, 0, 0, TM_PRECISION_EXACT, 0, 0, 0, nullptr, nullptr},
    // The scheme mask (TM_PACKED_* bits) is filled in by init().
    {sizeof(tm_kernel_cap_v1), TM_OP_DEQUANTIZE_PACKED, 0, 0, 0, TM_PRECISION_EXACT, 0, 0, 0, nullptr, nullptr},
    {sizeof(tm_kernel_cap_v1), TM_OP_QUANT_MOMENTS, 0, 0, 0, TM_PRECISION_EXACT, 0, 0, 0, nullptr, nullptr},
    {sizeof(tm_kernel_cap_v1), TM_OP_STEM_FRAME_SUMS, bits({DType::U8, DType::U16, DType::U32, DType::F32, DType::F64}), 0, 0, TM_PRECISION_EXACT, 0, 0, 0,
     nullptr, nullptr},
    {sizeof(tm_kernel_cap_v1), TM_OP_STEM_PATTERN_REDUCE, bits({DType::U8, DType::U16, DType::U32, DType::F32, DType::F64}), 0, 0, TM_PRECISION_EXACT, 0, 0,
     0, nullptr, nullptr},
    // display.colorize: f64 values; per-piece counts (259 x 8 bytes per 65,536 values) are its workspace.
    {sizeof(tm_kernel_cap_v1), TM_OP_DISPLAY_COLORIZE, bits({DType::F64}), 0, 0, TM_PRECISION_EXACT, 0, 0, 0.04, nullptr, nullptr},
    // stem.ssb_overlap, both variants (format bits TM_SSB_QUADRATIC, TM_SSB_DIRECT): the reference.
    {sizeof(tm_kernel_cap_v1), TM_OP_STEM_SSB_OVERLAP, (1ull << TM_SSB_QUADRATIC) | (1ull << TM_SSB_DIRECT), 0, 0,
     TM_PRECISION_DETERMINISTIC, 0, 0, 0, nullptr, nullptr},
    // decode.bitshuffle_lz4: elements of every dtype (only the width matters).
    {sizeof(tm_kernel_cap_v1), TM_OP_DECODE_BITSHUFFLE_LZ4, kAllTypes, 0, 0, TM_PRECISION_EXACT, 0, 0, 0, nullptr, nullptr},
    // lod.tile_stats: the reference of every method (op_contracts.h); a thread's pattern tables (65,536 x 2 x 2
    // bytes) are its workspace.
    {sizeof(tm_kernel_cap_v1), TM_OP_LOD_TILE_STATS, kAllTypes, 0, 0, TM_PRECISION_EXACT, 0, 65536 * 4, 0, nullptr, nullptr},
    // diff.tile_stats: the reference (float64 pairs, op_contracts.h).
    {sizeof(tm_kernel_cap_v1), TM_OP_DIFF_TILE_STATS, bits({DType::F64}), 0, 0, TM_PRECISION_EXACT, 0, 0, 0, nullptr, nullptr},
    // stem.compact_sums: the reference (the compact image's bytes, op_contracts.h).
    {sizeof(tm_kernel_cap_v1), TM_OP_STEM_COMPACT_SUMS, bits({DType::U8}), 0, 0, TM_PRECISION_EXACT, 0, 0, 0, nullptr, nullptr},
};

std::string g_cpu_name;

std::string read_cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "host CPU";
}

void set_message(tm_message* msg, const std::string& text) {
  if (msg) std::snprintf(msg->text, sizeof msg->text, "%s", text.c_str());
}

tm_status init(tm_unavailable_reason* reason, tm_message*) {
  g_cpu_name = read_cpu_name() + " (" + std::to_string(default_thread_count()) + " threads)";
  kKernels[kQuantExact].workspace_fixed_bytes = radix_select_workspace_bytes(default_thread_count());
  kKernels[kDequantGgml].dtype_mask = dequantize_format_mask();
  kKernels[kBlockStats].dtype_mask = block_stats_format_mask();
  kKernels[kDequantPacked].dtype_mask = packed_scheme_mask();
  kKernels[kQuantMoments].dtype_mask = quant_moments_format_mask();
  *reason = TM_AVAILABLE;
  return TM_OK;
}

void shutdown() {}

uint32_t device_count() { return 1; }

tm_status device_info(uint32_t index, tm_device_info_v1* out) {
  if (index != 0) return TM_ERR_INVALID_ARGUMENT;
  const uint64_t ram = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  *out = {sizeof(tm_device_info_v1), TM_DEVICE_CPU, g_cpu_name.c_str(), "host-cpu", ram, ram, ram,
          TM_FEATURE_F64 | TM_FEATURE_F16 | TM_FEATURE_INT64_ATOMICS | TM_FEATURE_INT64, 0.0, nullptr};
  return TM_OK;
}

uint32_t kernel_count() { return kKernelCount; }

tm_status kernel_info(uint32_t index, tm_kernel_cap_v1* out) {
  if (index >= kKernelCount) return TM_ERR_INVALID_ARGUMENT;
  *out = kKernels[index];
  return TM_OK;
}

tm_status run_moments(const tm_kernel_call_v1& c, tm_message* msg) {
  const uint64_t blocks = (c.element_count + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
  if (c.output_size < blocks * sizeof(tm_moments_partial_v1)) {
    set_message(msg, "stats.moments: output holds " + std::to_string(c.output_size) + " bytes, " +
                         std::to_string(blocks) + " partials need " +
                         std::to_string(blocks * sizeof(tm_moments_partial_v1)));
    return TM_ERR_INVALID_ARGUMENT;
  }
  const DType dt = static_cast<DType>(c.dtype);
  const size_t width = dtype_size(dt);
  auto* out = static_cast<tm_moments_partial_v1*>(c.output);
  const auto* in = static_cast<const uint8_t*>(c.input);
  ThreadPool::shared(c.threads).parallel_for(blocks, [&](uint64_t b, uint64_t e, unsigned) {
    for (uint64_t i = b; i < e; ++i) {
      const uint64_t first = i * TM_STATS_BLOCK_ELEMENTS;
      const uint64_t n = std::min<uint64_t>(TM_STATS_BLOCK_ELEMENTS, c.element_count - first);
      out[i] = block_moments(dt, in + first * width, n);
    }
  });
  return TM_OK;
}

// Runs add(range_data, range_count, local_counts) on each thread's range and sums the local counts.
template <class Add>
void parallel_counts(const tm_kernel_call_v1& c, uint64_t slots, Add add) {
  const size_t width = dtype_size(static_cast<DType>(c.dtype));
  auto* out = static_cast<uint64_t*>(c.output);
  const uint64_t chunk = TM_STATS_BLOCK_ELEMENTS;
  const uint64_t chunks = (c.element_count + chunk - 1) / chunk;
  if (chunks <= 1 || c.threads <= 1) {  // small tensors: no per-thread tables to allocate and merge
    add(static_cast<const uint8_t*>(c.input), c.element_count, out);
    return;
  }
  ThreadPool& pool = ThreadPool::shared(c.threads);
  std::vector<std::vector<uint64_t>> local(pool.size(), std::vector<uint64_t>(slots, 0));
  // Ranges of whole 64 Ki-element chunks so each thread streams contiguous memory.
  pool.parallel_for(chunks, [&](uint64_t b, uint64_t e, unsigned part) {
    const uint64_t first = b * chunk, last = std::min(c.element_count, e * chunk);
    add(static_cast<const uint8_t*>(c.input) + first * width, last - first, local[part].data());
  });
  for (const auto& l : local)
    for (uint64_t i = 0; i < slots; ++i) out[i] += l[i];
}

tm_status run_histogram(const tm_kernel_call_v1& c, tm_message* msg) {
  if (c.params_size < sizeof(tm_histogram_params_v1)) return set_message(msg, "stats.histogram: params missing"), TM_ERR_INVALID_ARGUMENT;
  const auto& p = *static_cast<const tm_histogram_params_v1*>(c.params);
  if (p.bins == 0 || p.bins > 65536 || !p.edges)
    return set_message(msg, "stats.histogram: bins must be 1..65536 with edges"), TM_ERR_INVALID_ARGUMENT;
  for (uint32_t i = 0; i <= p.bins; ++i)
    if (!std::isfinite(p.edges[i]) || (i && !(p.edges[i] > p.edges[i - 1])))
      return set_message(msg, "stats.histogram: edges must be finite and strictly increasing (edge " +
                                  std::to_string(i) + ")"),
             TM_ERR_INVALID_ARGUMENT;
  if (c.output_size < (p.bins + 2ull) * sizeof(uint64_t))
    return set_message(msg, "stats.histogram: output too small"), TM_ERR_INVALID_ARGUMENT;
  const DType dt = static_cast<DType>(c.dtype);
  parallel_counts(c, p.bins + 2ull, [&](const uint8_t* data, uint64_t n, uint64_t* counts) {
    histogram_add(dt, data, n, p.edges, p.bins, counts);
  });
  return TM_OK;
}

tm_status run_bitpattern(const tm_kernel_call_v1& c, tm_message* msg) {
  const DType dt = static_cast<DType>(c.dtype);
  const uint64_t slots = 1ull << (8 * dtype_size(dt));
  if (c.output_size < slots * sizeof(uint64_t))
    return set_message(msg, "stats.bitpattern_histogram: output too small"), TM_ERR_INVALID_ARGUMENT;
  parallel_counts(c, slots, [&](const uint8_t* data, uint64_t n, uint64_t* counts) { bitpattern_add(dt, data, n, counts); });
  return TM_OK;
}

tm_status run_quantiles(const tm_kernel_call_v1& c, tm_message* msg) {
  if (c.params_size < sizeof(tm_quantiles_params_v1)) return set_message(msg, "stats.quantiles: params missing"), TM_ERR_INVALID_ARGUMENT;
  const auto& p = *static_cast<const tm_quantiles_params_v1*>(c.params);
  if (c.output_size < p.count * sizeof(tm_quantile_value_v1))
    return set_message(msg, "stats.quantiles: output too small"), TM_ERR_INVALID_ARGUMENT;
  for (uint32_t i = 0; i < p.count; ++i)
    if (!(p.probabilities[i] >= 0 && p.probabilities[i] <= 1))
      return set_message(msg, "stats.quantiles: probability " + std::to_string(i) + " is outside [0, 1]"), TM_ERR_INVALID_ARGUMENT;
  const DType dt = static_cast<DType>(c.dtype);
  auto* out = static_cast<tm_quantile_value_v1*>(c.output);
  switch (c.kernel_index) {
    case kQuantExact:
      if (p.count > kMaxRadixProbabilities)
        return set_message(msg, "stats.quantiles: at most " + std::to_string(kMaxRadixProbabilities) +
                                    " probabilities per call"), TM_ERR_INVALID_ARGUMENT;
      // Small inputs: copying them (at most 128 KiB) and selecting is faster than setting up the
      // radix passes. Both are exact.
      if (c.element_count <= (uint64_t{1} << 14)) quantiles_by_selection(dt, c.input, c.element_count, 1, p, out);
      else quantiles_radix(dt, c.input, c.element_count, p, out, c.threads);
      break;
    case kSketchF32: case kSketchF64: quantiles_bitpattern_sketch(dt, c.input, c.element_count, p, out); break;
    default: quantiles_sampling(dt, c.input, c.element_count, p, out); break;
  }
  return TM_OK;
}

tm_status run(const tm_kernel_call_v1* call, tm_message* msg) {
  if (!call || call->kernel_index >= kKernelCount) return set_message(msg, "cpu: no such kernel"), TM_ERR_INVALID_ARGUMENT;
  const tm_kernel_cap_v1& k = kKernels[call->kernel_index];
  const bool dtype_ok = tm_op_takes_format(k.op) ? call->dtype == TM_DTYPE_F32
                                                       : (k.dtype_mask & (1ull << static_cast<uint32_t>(call->dtype))) != 0;
  if (call->op != k.op || !dtype_ok)
    return set_message(msg, "cpu: kernel " + std::to_string(call->kernel_index) + " does not take this op/dtype"), TM_ERR_UNSUPPORTED;
  if (call->element_count && !call->input) return set_message(msg, "cpu: null input"), TM_ERR_INVALID_ARGUMENT;
  try {
    switch (k.op) {
      case TM_OP_STATS_MOMENTS: return run_moments(*call, msg);
      case TM_OP_STATS_HISTOGRAM: return run_histogram(*call, msg);
      case TM_OP_STATS_BITPATTERN_HISTOGRAM: return run_bitpattern(*call, msg);
      case TM_OP_STATS_QUANTILES: return run_quantiles(*call, msg);
      case TM_OP_DEQUANTIZE_GGML:
      case TM_OP_DIFF_MOMENTS:
      case TM_OP_GGML_BLOCK_STATS:
      case TM_OP_DEQUANTIZE_PACKED:
      case TM_OP_QUANT_MOMENTS:
      case TM_OP_STEM_FRAME_SUMS:
      case TM_OP_STEM_PATTERN_REDUCE:
      case TM_OP_STEM_COMPACT_SUMS:
      case TM_OP_DISPLAY_COLORIZE:
      case TM_OP_STEM_SSB_OVERLAP:
      case TM_OP_DIFF_TILE_STATS:
      case TM_OP_DECODE_BITSHUFFLE_LZ4: {
        std::string error;
        const tm_status st = k.op == TM_OP_DIFF_MOMENTS        ? run_diff_moments(*call, &error)
                             : k.op == TM_OP_DISPLAY_COLORIZE  ? run_display_colorize(*call, &error)
                             : k.op == TM_OP_STEM_FRAME_SUMS   ? run_stem_frame_sums(*call, &error)
                             : k.op == TM_OP_STEM_PATTERN_REDUCE ? run_stem_pattern_reduce(*call, &error)
                             : k.op == TM_OP_STEM_COMPACT_SUMS ? run_stem_compact_sums(*call, &error)
                             : k.op == TM_OP_GGML_BLOCK_STATS  ? run_block_stats(*call, &error)
                             : k.op == TM_OP_DEQUANTIZE_PACKED ? run_dequantize_packed(*call, &error)
                             : k.op == TM_OP_QUANT_MOMENTS     ? run_quant_moments(*call, &error)
                             : k.op == TM_OP_STEM_SSB_OVERLAP  ? run_stem_ssb_overlap(*call, &error)
                             : k.op == TM_OP_DECODE_BITSHUFFLE_LZ4 ? run_decode_bitshuffle_lz4(*call, &error)
                             : k.op == TM_OP_DIFF_TILE_STATS   ? run_diff_tile_stats(*call, &error)
                                                               : run_dequantize(*call, &error);
        if (st != TM_OK) set_message(msg, error);
        return st;
      }
      case TM_OP_LOD_TILE_STATS: {
        const std::string problem = tile_stats_call_problem(*call);
        if (!problem.empty()) return set_message(msg, "lod.tile_stats: " + problem), TM_ERR_INVALID_ARGUMENT;
        tile_stats(*call);
        return TM_OK;
      }
      default: return set_message(msg, "cpu: unknown op"), TM_ERR_UNSUPPORTED;
    }
  } catch (const std::bad_alloc&) {
    set_message(msg, "cpu: out of memory");
    return TM_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_message(msg, std::string("cpu: ") + e.what());
    return TM_ERR_INTERNAL;
  }
}

const tm_backend_v1 kTable = {
    TM_PLUGIN_ABI_VERSION, sizeof(tm_backend_v1), "cpu",
    "Tier-1 CPU backend: Highway SIMD with dynamic dispatch, all cores",
    init, shutdown, device_count, device_info, kernel_count, kernel_info, run,
    nullptr, nullptr, nullptr};  // works on host memory: no residency or device-output extension

}  // namespace

const tm_backend_v1* cpu_backend_table() { return &kTable; }

}  // namespace tmorph::cpu
