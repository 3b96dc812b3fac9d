#include "decode_chunks_kernel.h"

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <vector>

#include "support/bitshuffle_lz4_decode.h"
#include "support/thread_pool.h"
#include "tensormorph/contract_math.h"
#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

namespace {

uint64_t mask_chunk(uint8_t* px, uint64_t n, uint32_t es, const DecodeMasking& m) {
  switch (es) {
    case 1: return mask_decoded_chunk(px, n, m);
    case 2: return mask_decoded_chunk(reinterpret_cast<uint16_t*>(px), n, m);
    case 4: return mask_decoded_chunk(reinterpret_cast<uint32_t*>(px), n, m);
    default: return mask_decoded_chunk(reinterpret_cast<uint64_t*>(px), n, m);
  }
}

}  // namespace

tm_status run_decode_bitshuffle_lz4(const tm_kernel_call_v1& c, std::string* error) {
  const uint32_t es = static_cast<uint32_t>(dtype_size(static_cast<DType>(c.dtype)));
  // The CPU has no device buffers: its output is always the host's.
  const bool device_output = c.struct_size >= offsetof(tm_kernel_call_v1, output_offset) + sizeof c.output_offset && c.output_buffer;
  std::string problem = device_output ? "output_buffer: the CPU backend has no device buffers"
                                      : decode_call_problem(c, es, c.output ? c.output_size : 0);
  if (!problem.empty()) {
    *error = "decode.bitshuffle_lz4: " + problem;
    return TM_ERR_INVALID_ARGUMENT;
  }
  const auto& p = *static_cast<const tm_decode_bitshuffle_lz4_params_v1*>(c.params);
  const DecodeMasking masking = decode_masking(c);
  const auto* in = static_cast<const uint8_t*>(c.input);
  auto* out = static_cast<uint8_t*>(c.output);
  const uint64_t chunk_bytes_out = p.chunk_elements * es;
  // Each thread decodes a run of chunks and keeps the first failure of its run; the lowest is reported.
  std::vector<std::pair<uint64_t, std::string>> failures;
  std::mutex mutex;
  uint64_t all_ones = 0;
  auto decode = [&](uint64_t begin, uint64_t end) {
    std::vector<uint8_t> scratch;
    uint64_t zeroed = 0;
    for (uint64_t i = begin; i < end; ++i) {
      std::string why = decode_bitshuffle_lz4(in + p.chunk_offsets[i], p.chunk_offsets[i + 1] - p.chunk_offsets[i], es,
                                              out + i * chunk_bytes_out, chunk_bytes_out, scratch);
      if (why.empty()) {
        zeroed += mask_chunk(out + i * chunk_bytes_out, p.chunk_elements, es, masking);
        continue;
      }
      std::lock_guard<std::mutex> lock(mutex);
      failures.emplace_back(i, std::move(why));
      break;
    }
    std::lock_guard<std::mutex> lock(mutex);
    all_ones += zeroed;
  };
  if (c.threads <= 1 || p.chunk_count <= 1) decode(0, p.chunk_count);
  else ThreadPool::shared(c.threads).parallel_for(p.chunk_count, [&](uint64_t b, uint64_t e, unsigned) { decode(b, e); });
  if (failures.empty()) {
    if (masking.all_ones_zeroed) *masking.all_ones_zeroed += all_ones;
    return TM_OK;
  }
  const auto first = std::min_element(failures.begin(), failures.end());
  if (masking.failed_chunk) *masking.failed_chunk = first->first;
  *error = "chunk " + std::to_string(first->first) + ": " + first->second;
  return TM_ERR_INVALID_ARGUMENT;
}

}  // namespace tmorph::cpu
