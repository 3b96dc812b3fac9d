#include "decode_chunks_kernel.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "support/bitshuffle_lz4_decode.h"
#include "support/thread_pool.h"
#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

tm_status run_decode_bitshuffle_lz4(const tm_kernel_call_v1& c, std::string* error) {
  if (c.params_size < sizeof(tm_decode_bitshuffle_lz4_params_v1) || !c.params) {
    *error = "decode.bitshuffle_lz4: params missing";
    return TM_ERR_INVALID_ARGUMENT;
  }
  const auto& p = *static_cast<const tm_decode_bitshuffle_lz4_params_v1*>(c.params);
  const uint32_t es = static_cast<uint32_t>(dtype_size(static_cast<DType>(c.dtype)));
  if (p.chunk_count && !p.chunk_offsets) {
    *error = "decode.bitshuffle_lz4: chunk offsets missing";
    return TM_ERR_INVALID_ARGUMENT;
  }
  if (p.chunk_elements && p.chunk_count > c.element_count / p.chunk_elements) {
    *error = "decode.bitshuffle_lz4: " + std::to_string(p.chunk_count) + " chunks of " + std::to_string(p.chunk_elements) +
             " elements exceed the call's " + std::to_string(c.element_count);
    return TM_ERR_INVALID_ARGUMENT;
  }
  if (p.chunk_count * p.chunk_elements != c.element_count || c.element_count > UINT64_MAX / es ||
      c.output_size < c.element_count * es) {
    *error = "decode.bitshuffle_lz4: element_count must be chunk_count x chunk_elements, and the output hold them";
    return TM_ERR_INVALID_ARGUMENT;
  }
  for (uint64_t i = 0; i < p.chunk_count; ++i)
    if (p.chunk_offsets[i + 1] < p.chunk_offsets[i] || (i == 0 && p.chunk_offsets[0] != 0)) {
      *error = "decode.bitshuffle_lz4: chunk offsets must start at 0 and never decrease (chunk " + std::to_string(i) + ")";
      return TM_ERR_INVALID_ARGUMENT;
    }
  const auto* in = static_cast<const uint8_t*>(c.input);
  auto* out = static_cast<uint8_t*>(c.output);
  const uint64_t chunk_bytes_out = p.chunk_elements * es;
  // Each thread decodes a run of chunks and keeps the first failure of its run; the lowest is reported.
  std::vector<std::pair<uint64_t, std::string>> failures;
  std::mutex failures_mutex;
  auto decode = [&](uint64_t begin, uint64_t end) {
    std::vector<uint8_t> scratch;
    for (uint64_t i = begin; i < end; ++i) {
      std::string problem = decode_bitshuffle_lz4(in + p.chunk_offsets[i], p.chunk_offsets[i + 1] - p.chunk_offsets[i], es,
                                                  out + i * chunk_bytes_out, chunk_bytes_out, scratch);
      if (problem.empty()) continue;
      std::lock_guard<std::mutex> lock(failures_mutex);
      failures.emplace_back(i, std::move(problem));
      return;
    }
  };
  if (c.threads <= 1 || p.chunk_count <= 1) decode(0, p.chunk_count);
  else ThreadPool::shared(c.threads).parallel_for(p.chunk_count, [&](uint64_t b, uint64_t e, unsigned) { decode(b, e); });
  if (failures.empty()) return TM_OK;
  const auto first = std::min_element(failures.begin(), failures.end());
  *error = "chunk " + std::to_string(first->first) + ": " + first->second;
  return TM_ERR_INVALID_ARGUMENT;
}

}  // namespace tmorph::cpu
