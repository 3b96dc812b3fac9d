// lod.tile_stats on Vulkan (op_contracts.h): every method for every dtype the kernels take. The widened method and
// the 8-bit pattern method are shaders/tile_stats.comp, the segment lanes (f32, bf16, f16) tile_segments.comp, the
// 16-bit pattern scan (bf16, f16) tile_patterns16.comp, whose 65,536 pattern counts per tile live in Scratch0. A
// launch computes a run of whole tiles: the band itself when it fits one storage binding, else its columns of
// those tiles gathered on the host.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tensormorph/contract_math.h"
#include "tensormorph/op_contracts.h"
#include "vk_error.h"
#include "vk_kernels.h"

namespace tmorph::vk {

void run_tile_stats(Device& device, const tm_kernel_call_v1& call, const Resident*) {
  const std::string problem = tile_stats_problem(call);
  if (!problem.empty()) throw VkError(TM_ERR_INVALID_ARGUMENT, "lod.tile_stats: " + problem);
  const auto& p = *static_cast<const tm_tile_stats_params_v1*>(call.params);
  const uint32_t width = dtype_width(call.dtype);
  static_assert(sizeof(tm_tile_stats_v1) == 72 + 4 * TM_TILE_BUCKETS, "the shader's Tile: 9 eight-byte fields, 256 counts");
  // Which shader runs the method, the pattern totals its output holds before the tiles, and its pattern
  // counts per tile in scratch memory (the 16-bit scan only).
  const bool patterns16 = p.method == TM_TILE_PATTERNS && width == 2;
  const uint64_t totals = patterns16 ? uint64_t{1} << 16 : TM_TILE_BUCKETS;
  const uint64_t totals_bytes = 4 * totals, scratch_per_tile = patterns16 ? 4 * (uint64_t{1} << 16) : 0;
  constexpr uint64_t kMaxScratchBytes = uint64_t{64} << 20;
  const uint64_t tiles = (p.cols + p.tile_cols - 1) / p.tile_cols;
  const uint64_t limit = chunk_bytes(device.physical());
  const uint64_t tile_bytes = p.rows * p.tile_cols * width;
  uint64_t per_launch = std::min({limit / tile_bytes, (limit - totals_bytes) / sizeof(tm_tile_stats_v1),
                                  uint64_t{device.physical().max_workgroup_count_x}});
  if (scratch_per_tile) per_launch = std::min(per_launch, std::min(limit, kMaxScratchBytes) / scratch_per_tile);
  per_launch = std::max<uint64_t>(1, per_launch);
  const Pipeline& pipeline =
      p.method == TM_TILE_SEGMENTS ? device.pipeline("tile_segments", {static_cast<uint32_t>(call.dtype), width}, 2, 16)
      : patterns16                 ? device.pipeline("tile_patterns16", {static_cast<uint32_t>(call.dtype), width}, 3, 16)
                                   : device.pipeline("tile_stats", {static_cast<uint32_t>(call.dtype), width, p.method}, 2, 16);
  const auto* in = static_cast<const uint8_t*>(call.input);
  auto* out = static_cast<tm_tile_stats_v1*>(call.output);
  std::vector<uint8_t> gathered;
  for (uint64_t t0 = 0; t0 < tiles; t0 += per_launch) {
    const uint64_t t1 = std::min(tiles, t0 + per_launch);
    const uint64_t c0 = t0 * p.tile_cols, w = std::min<uint64_t>(p.cols, t1 * p.tile_cols) - c0;
    uint64_t upload = 0;
    if (w == p.cols) {
      upload = device.write_input(in, p.rows * p.cols * width);
    } else {
      gathered.resize(p.rows * w * width);
      for (uint64_t r = 0; r < p.rows; ++r)
        std::memcpy(gathered.data() + r * w * width, in + (r * p.cols + c0) * width, w * width);
      upload = device.write_input(gathered.data(), gathered.size());
    }
    const uint64_t out_bytes = totals_bytes + (t1 - t0) * sizeof(tm_tile_stats_v1);
    const Buffer& output = device.buffer(Slot::Output, out_bytes);
    const uint32_t push[4] = {static_cast<uint32_t>(p.rows), static_cast<uint32_t>(w), p.tile_cols, 0};
    Dispatch d;
    d.pipeline = &pipeline;
    d.bindings = {{&device.buffer(Slot::Input, 0), 0}, {&output, 0}};
    if (patterns16) d.bindings.push_back({&device.buffer(Slot::Scratch0, (t1 - t0) * scratch_per_tile), 0});
    d.push = push;
    d.groups = static_cast<uint32_t>(t1 - t0);
    d.upload_bytes = upload;
    d.zero_first = {{&output, totals_bytes}};
    d.result_bytes = out_bytes;
    device.run(d);
    const auto* results = static_cast<const uint8_t*>(device.results());
    std::memcpy(out + t0, results + totals_bytes, (t1 - t0) * sizeof(tm_tile_stats_v1));
    if (p.method == TM_TILE_PATTERNS && p.pattern_counts) {
      std::vector<uint32_t> counts(totals);
      std::memcpy(counts.data(), results, totals_bytes);
      for (uint64_t k = 0; k < totals; ++k) p.pattern_counts[k] += counts[k];
    }
  }
}

}  // namespace tmorph::vk
