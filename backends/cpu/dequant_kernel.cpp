#include "dequant_kernel.h"

#include "support/thread_pool.h"
#include "dequant/ggml_block_stats.h"
#include "dequant/ggml_dequant.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

uint64_t dequantize_format_mask() {
  uint64_t mask = 0;
  for (uint32_t id = 0; id < 64; ++id)
    if (ggml_block_format(id)) mask |= uint64_t{1} << id;
  return mask;
}

tm_status run_dequantize(const tm_kernel_call_v1& c, std::string* error) {
  if (c.params_size < sizeof(tm_dequantize_ggml_params_v1) || !c.params) {
    *error = "dequantize.ggml: params missing";
    return TM_ERR_INVALID_ARGUMENT;
  }
  const auto& p = *static_cast<const tm_dequantize_ggml_params_v1*>(c.params);
  const GgmlBlockFormat* f = ggml_block_format(p.ggml_type);
  if (!f) {
    *error = "dequantize.ggml: no decoder for ggml type " + std::to_string(p.ggml_type);
    return TM_ERR_UNSUPPORTED;
  }
  if (c.element_count % f->block_elements) {
    *error = std::string("dequantize.ggml: ") + std::to_string(c.element_count) + " elements are not whole " + f->name + " blocks";
    return TM_ERR_INVALID_ARGUMENT;
  }
  if (c.output_size < c.element_count * sizeof(float)) {
    *error = "dequantize.ggml: output too small";
    return TM_ERR_INVALID_ARGUMENT;
  }
  const auto* src = static_cast<const uint8_t*>(c.input);
  auto* dst = static_cast<float*>(c.output);
  const uint64_t blocks = c.element_count / f->block_elements;
  // Pieces of at least 64 blocks per task, so small tensors do not pay for the pool.
  const uint64_t grain = 64;
  const uint64_t tasks = (blocks + grain - 1) / grain;
  if (c.threads <= 1 || tasks <= 1) {
    dequantize_ggml_blocks(*f, src, blocks, dst);
    return TM_OK;
  }
  ThreadPool::shared(c.threads).parallel_for(tasks, [&](uint64_t b, uint64_t e, unsigned) {
    const uint64_t first = b * grain, last = std::min(blocks, e * grain);
    dequantize_ggml_blocks(*f, src + first * f->block_bytes, last - first, dst + first * f->block_elements);
  });
  return TM_OK;
}

uint64_t block_stats_format_mask() {
  uint64_t mask = 0;
  for (uint32_t id = 0; id < 64; ++id)
    if (ggml_block_layout(id)) mask |= uint64_t{1} << id;
  return mask;
}

tm_status run_block_stats(const tm_kernel_call_v1& c, std::string* error) {
  if (c.params_size < sizeof(tm_ggml_block_stats_params_v1) || !c.params) {
    *error = "quant.block_stats: params missing";
    return TM_ERR_INVALID_ARGUMENT;
  }
  const auto& p = *static_cast<const tm_ggml_block_stats_params_v1*>(c.params);
  const GgmlBlockLayout* l = ggml_block_layout(p.ggml_type);
  if (!l) {
    *error = "quant.block_stats: no layout for ggml type " + std::to_string(p.ggml_type);
    return TM_ERR_UNSUPPORTED;
  }
  if (c.element_count % l->block_elements || c.output_size < sizeof(tm_ggml_block_stats_v1)) {
    *error = "quant.block_stats: not whole blocks, or output too small";
    return TM_ERR_INVALID_ARGUMENT;
  }
  auto* out = static_cast<tm_ggml_block_stats_v1*>(c.output);
  out->code_bits = ggml_counts_codes(l->type_id) ? l->code_bits : 0;
  out->has_scale = l->has_scale && p.scales;
  out->has_min = l->has_min && p.mins;
  ggml_block_stats(*l, static_cast<const uint8_t*>(c.input), c.element_count / l->block_elements, p.scales, p.mins,
                   out->code_counts, &out->saturated);
  return TM_OK;
}

}  // namespace tmorph::cpu
