#include "ops/dequantize.h"

#include "support/thread_pool.h"
#include "ops/kernel_call.h"
#include "ops/moments.h"
#include "ops/streamed_stats.h"
#include "tensormorph/error.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/planner.h"

namespace tmorph {

namespace {

// Blocks per kernel call: bounds what one call touches (16 Mi values of Q*_K) whatever the tensor size.
constexpr uint64_t kBlocksPerCall = 65536;
// Values decoded at a time for statistics (4 MiB of float32): a multiple of every block size.
constexpr uint64_t kPieceElements = uint64_t{1} << 20;

// A request for an op over t's blocks (the planner matches kernels by block format for these ops).
OpRequest block_format_request(tm_op op, const QuantizedTensor& t) {
  OpRequest r;
  r.op = op;
  r.dtype = DType::F32;
  r.elements = t.elements;
  r.bytes = t.elements / t.block_elements * t.block_bytes;
  r.format_id = t.ggml_type;
  r.format_name = t.format;
  r.format_block_elements = t.block_elements;
  r.format_block_bytes = t.block_bytes;
  return r;
}

}  // namespace

Placement place_dequantize(const Planner& planner, const QuantizedTensor& t) {
  return planner.place(block_format_request(TM_OP_DEQUANTIZE_GGML, t));
}

void dequantize_range(const Placement& placement, const QuantizedTensor& t, uint64_t first, uint64_t count, float* dst,
                      unsigned threads) {
  if (first % t.block_elements || (count % t.block_elements && first + count != t.elements) || first + count > t.elements)
    throw Error(ErrorKind::Internal, "dequantize: range is not whole blocks of " + t.format);
  const tm_dequantize_ggml_params_v1 params{t.ggml_type, 0};
  for (uint64_t done = 0; done < count;) {
    const uint64_t n = std::min(count - done, kBlocksPerCall * t.block_elements);
    const uint8_t* src = t.data + (first + done) / t.block_elements * t.block_bytes;
    run_placed_kernel(placement, TM_OP_DEQUANTIZE_GGML,
                      {DType::F32, src, n, &params, sizeof params, dst + done, n * sizeof(float), threads});
    done += n;
  }
}

namespace {

// The moments of t from its codes and scales (op quant.moments), when a backend here computes them for
// t's format; nullopt otherwise (the values are then decoded and summarised).
std::optional<KnownMoments> moments_from_codes(const QuantizedTensor& t, const Planner& planner, unsigned threads) {
  Placement pl;
  try {
    pl = planner.place(block_format_request(TM_OP_QUANT_MOMENTS, t));
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Unavailable) return std::nullopt;
    throw;
  }
  const tm_dequantize_ggml_params_v1 params{t.ggml_type, 0};
  MomentsReducer reducer;
  // Whole canonical blocks per call (a multiple of every block size), partials merged in order.
  constexpr uint64_t kValuesPerCall = uint64_t{64} * TM_STATS_BLOCK_ELEMENTS;
  std::vector<tm_moments_partial_v1> partials(kValuesPerCall / TM_STATS_BLOCK_ELEMENTS);
  for (uint64_t first = 0; first < t.elements; first += kValuesPerCall) {
    const uint64_t n = std::min(kValuesPerCall, t.elements - first);
    const uint64_t blocks = (n + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
    run_placed_kernel(pl, TM_OP_QUANT_MOMENTS,
                      {DType::F32, t.data + first / t.block_elements * t.block_bytes, n, &params, sizeof params,
                       partials.data(), blocks * sizeof(tm_moments_partial_v1), threads});
    for (uint64_t k = 0; k < blocks; ++k) reducer.push(partials[k]);
  }
  return KnownMoments{summarize_moments(finalize_moments(reducer.finish(), DType::F32)), pl};
}

}  // namespace

StatsResult compute_quantized_stats(const QuantizedTensor& t, const Planner& planner, const StatsOptions& options) {
  const Placement dq = place_dequantize(planner, t);
  const unsigned threads = options.threads ? options.threads : default_thread_count();
  const std::optional<KnownMoments> known = moments_from_codes(t, planner, threads);
  std::vector<float> piece;
  return streamed_float_stats(
      t.elements, dq,
      [&](const FloatSink& sink) {
        piece.resize(std::min(t.elements, kPieceElements));
        for (uint64_t first = 0; first < t.elements; first += kPieceElements) {
          const uint64_t n = std::min(kPieceElements, t.elements - first);
          dequantize_range(dq, t, first, n, piece.data(), threads);
          sink(piece.data(), n);
        }
      },
      planner, options, known);
}

QuantizationStats compute_quantization_stats(const QuantizedTensor& t, const Planner& planner, const StatsOptions& options) {
  QuantizationStats q;
  const Placement pl = planner.place(block_format_request(TM_OP_GGML_BLOCK_STATS, t));
  q.placement.push_back(pl);
  q.bits_per_weight = 8.0 * t.block_bytes / t.block_elements;
  const uint64_t blocks = t.elements / t.block_elements;
  std::vector<float> scales(blocks), mins(blocks);
  tm_ggml_block_stats_v1 out{};
  const unsigned threads = options.threads ? options.threads : default_thread_count();
  for (uint64_t first = 0; first < blocks; first += kBlocksPerCall) {
    const uint64_t n = std::min(kBlocksPerCall, blocks - first);
    const tm_ggml_block_stats_params_v1 params{t.ggml_type, 0, scales.data() + first, mins.data() + first};
    run_placed_kernel(pl, TM_OP_GGML_BLOCK_STATS,
                      {DType::F32, t.data + first * t.block_bytes, n * t.block_elements, &params, sizeof params, &out,
                       sizeof out, threads});
  }
  if (out.has_scale) q.scales = compute_stats(scales.data(), DType::F32, blocks, planner, options);
  if (out.has_min) q.mins = compute_stats(mins.data(), DType::F32, blocks, planner, options);
  if (q.scales) q.placement.insert(q.placement.end(), q.scales->placement.begin(), q.scales->placement.end());
  q.code_bits = out.code_bits;
  if (q.code_bits) {
    const size_t slots = q.code_bits == 8 ? 256 : size_t{1} << q.code_bits;
    q.code_counts.assign(out.code_counts, out.code_counts + slots);
    for (auto c : q.code_counts) q.codes += c;
    q.saturated = out.saturated;
  }
  return q;
}

}  // namespace tmorph
