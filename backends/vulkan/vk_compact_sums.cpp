// TM_OP_STEM_COMPACT_SUMS on Vulkan (shaders/stem_compact_sums.comp): the compact image read where it is, a page
// at a time. A resident image (the residency extension: uploaded once by core, then named by input_buffer) is bound
// in place, so repeated products move nothing but their small tables; a host image is copied a page per launch.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tensormorph/contract_math.h"
#include "tensormorph/op_contracts.h"
#include "vk_error.h"
#include "vk_kernels.h"

namespace tmorph::vk {

void run_stem_compact_sums(Device& device, const tm_kernel_call_v1& call, const Resident* resident) {
  if (const std::string problem = compact_sums_problem(call); !problem.empty()) throw VkError(TM_ERR_INVALID_ARGUMENT, problem);
  const auto& p = *static_cast<const tm_stem_compact_sums_params_v1*>(call.params);
  if (!resident && !call.input) throw VkError(TM_ERR_INVALID_ARGUMENT, "stem.compact_sums: no input (host or resident)");
  const uint64_t page_bytes = TM_STEM_COMPACT_PAGE_BYTES, limit = chunk_bytes(device.physical());
  const uint64_t row_values = TM_STEM_FRAME_SUMS_FIXED + p.list_count, device_row = row_values + 1;
  const uint64_t pixels = p.pixels_per_frame;

  // Jobs: each requested position's output row and page-local index, grouped by page (stable: output order kept).
  std::vector<uint64_t> order(p.position_count);
  std::vector<uint32_t> page_of(p.position_count);
  for (uint64_t i = 0; i < p.position_count; ++i) {
    order[i] = i;
    page_of[i] = static_cast<uint32_t>(std::upper_bound(p.page_first + 1, p.page_first + p.page_count + 1, p.positions[i]) - (p.page_first + 1));
  }
  std::stable_sort(order.begin(), order.end(), [&](uint64_t a, uint64_t b) { return page_of[a] < page_of[b]; });

  // Aux: list bits (2 words per key), each key's pixel, then the jobs (page-local positions) in `order`.
  const uint64_t lists_at = 0, pixels_at = p.list_count ? 2 * pixels : 0, ranges_at = pixels_at + pixels;
  const uint64_t jobs_at = ranges_at + (p.list_ranges ? 2 * p.list_count : 0);
  const uint64_t aux_words = jobs_at + p.position_count;
  if (aux_words * 4 > limit)
    throw VkError(TM_ERR_INVALID_ARGUMENT, "stem.compact_sums: the key tables and positions (" + std::to_string(aux_words * 4) +
                                               " bytes) exceed one storage binding of " + std::to_string(limit));
  Buffer& aux = device.buffer(Slot::Aux, std::max<uint64_t>(4, aux_words * 4));
  auto* a = static_cast<uint32_t*>(aux.mapped);
  if (p.list_count) std::memcpy(a + lists_at, p.key_lists, pixels * 8);
  for (uint64_t k = 0; k < pixels; ++k) a[pixels_at + k] = p.pixel_of_key ? p.pixel_of_key[k] : static_cast<uint32_t>(k);
  if (p.list_ranges) std::memcpy(a + ranges_at, p.list_ranges, uint64_t{p.list_count} * 8);
  for (uint64_t i = 0; i < p.position_count; ++i)
    a[jobs_at + i] = static_cast<uint32_t>(p.positions[order[i]] - p.page_first[page_of[order[i]]]);

  const Pipeline& pipeline = device.pipeline("stem_compact_sums", {p.key_bytes}, 3, 44);
  auto* out = static_cast<uint64_t*>(call.output);
  const uint64_t max_groups = std::min<uint64_t>(device.physical().max_workgroup_count_x, limit / (device_row * 8));
  for (uint64_t first = 0; first < p.position_count;) {
    const uint32_t page = page_of[order[first]];
    uint64_t last = first;
    while (last < p.position_count && page_of[order[last]] == page) ++last;
    const uint64_t at = uint64_t{page} * page_bytes, bytes = std::min(page_bytes, call.element_count - at);
    Binding input;
    uint64_t upload = 0;
    if (resident) {
      const uint64_t pos = call.input_offset + at, within = pos % resident->chunk_bytes;
      if (within + bytes > resident->chunk_bytes)
        throw VkError(TM_ERR_UNSUPPORTED, "stem.compact_sums: page " + std::to_string(page) + " straddles two chunks of the resident copy (chunks of " +
                                              std::to_string(resident->chunk_bytes) + " bytes: TENSORMORPH_VULKAN_CHUNK_BYTES must be a multiple of " +
                                              std::to_string(page_bytes) + ")");
      input = {&resident->chunks.at(pos / resident->chunk_bytes), within};
    } else {
      upload = device.write_input(static_cast<const uint8_t*>(call.input) + at, bytes);
      input = {&device.buffer(Slot::Input, 0), 0};
    }
    for (uint64_t g = first; g < last; g += max_groups) {
      const uint64_t m = std::min(max_groups, last - g);
      const Buffer& sums = device.buffer(Slot::Output, m * device_row * 8);
      const uint32_t push[11] = {static_cast<uint32_t>(bytes / 4), static_cast<uint32_t>(pixels), p.cols, p.list_count, p.com_list,
                                 (p.flags & TM_STEM_LISTS_ONLY) ? 1u : 0u, static_cast<uint32_t>(lists_at), static_cast<uint32_t>(pixels_at),
                                 static_cast<uint32_t>(jobs_at + g), 0u,
                                 p.list_ranges ? static_cast<uint32_t>(ranges_at) : 0xFFFFFFFFu};
      Dispatch d;
      d.pipeline = &pipeline;
      d.bindings = {input, {&sums, 0}, {&aux, 0}};
      d.push = push;
      d.groups = static_cast<uint32_t>(m);
      d.upload_bytes = upload;
      d.result_bytes = m * device_row * 8;
      device.run(d);
      upload = 0;
      const auto* r = static_cast<const uint64_t*>(device.results());
      for (uint64_t i = 0; i < m; ++i) {
        if (r[i * device_row + row_values] != 0)
          throw VkError(TM_ERR_INVALID_ARGUMENT, "stem.compact_sums: page " + std::to_string(page) + " breaks the contract at page-local position " +
                                                     std::to_string(a[jobs_at + g + i]) + " (counts, offsets or a key outside the frame)");
        std::memcpy(out + order[g + i] * row_values, r + i * device_row, row_values * 8);
      }
    }
    first = last;
  }
}

}  // namespace tmorph::vk
