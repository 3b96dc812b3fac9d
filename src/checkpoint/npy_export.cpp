#include "checkpoint/npy_export.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "checkpoint/ggml_quantized.h"
#include "checkpoint/packed_dequantize.h"
#include "core/npy.h"
#include "ops/dequantize.h"
#include "tensormorph/error.h"
#include "tensormorph/planner.h"

namespace tmorph {

namespace {

constexpr uint64_t kPieceElements = uint64_t{1} << 20;

void write_bytes(std::ostream& out, const void* p, size_t n) {
  out.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
}

// A dense tensor's values: natively, widened exactly to float32 (bf16, f8), or bool as 0/1.
void write_dense(std::ostream& out, const Checkpoint& c, const CheckpointTensor& t, bool widen) {
  const size_t width = dtype_size(*t.dtype);
  const uint8_t* src = c.data(t);
  std::vector<uint8_t> buffer;
  for (uint64_t first = 0; first < t.elements; first += kPieceElements) {
    const uint64_t n = std::min(kPieceElements, t.elements - first);
    if (widen) {
      buffer.resize(n * 4);
      for (uint64_t i = 0; i < n; ++i) {
        const float f = static_cast<float>(element_to_double(*t.dtype, src + (first + i) * width));
        std::memcpy(&buffer[i * 4], &f, 4);
      }
    } else if (*t.dtype == DType::BOOL) {  // numpy's bool is exactly 0 or 1
      buffer.resize(n);
      for (uint64_t i = 0; i < n; ++i) buffer[i] = src[first + i] ? 1 : 0;
    } else {
      buffer.assign(src + first * width, src + (first + n) * width);
    }
    write_bytes(out, buffer.data(), buffer.size());
  }
}

// A ggml block format dequantized a few blocks at a time.
void write_ggml(std::ostream& out, const Checkpoint& c, const CheckpointTensor& t, const Planner& planner,
                unsigned threads) {
  const QuantizedTensor q = quantized_tensor(*t.ggml_type(), c.data(t), t.elements);
  const Placement placement = place_dequantize(planner, q);
  const uint64_t piece = std::max<uint64_t>(1, kPieceElements / q.block_elements) * q.block_elements;
  std::vector<float> values;
  for (uint64_t first = 0; first < t.elements; first += piece) {
    const uint64_t n = std::min(piece, t.elements - first);
    values.resize(n);
    dequantize_range(placement, q, first, n, values.data(), threads);
    write_bytes(out, values.data(), n * sizeof(float));
  }
}

// A packed scheme decoded a few rows (a multiple of 8) at a time.
void write_packed(std::ostream& out, const Checkpoint& c, const CheckpointTensor& t, const Planner& planner,
                  unsigned threads) {
  const PackedDecoder decoder(c, t, planner);
  const uint64_t rows = std::max<uint64_t>(8, kPieceElements / std::max<uint64_t>(1, decoder.cols())) / 8 * 8;
  std::vector<float> values;
  for (uint64_t first = 0; first < decoder.rows(); first += rows) {
    const uint64_t n = std::min(rows, decoder.rows() - first);
    values.resize(n * decoder.cols());
    decoder.decode_rows(first, n, values.data(), threads);
    write_bytes(out, values.data(), values.size() * sizeof(float));
  }
}

}  // namespace

NpyExport write_npy(const Checkpoint& c, const CheckpointTensor& t, const Planner* planner, unsigned threads,
                    std::ostream& out) {
  if (!t.readable()) t.refuse_unreadable();
  if (t.dequantized() && !planner) throw Error(ErrorKind::Internal, "write_npy: " + t.name + " needs a planner to decode");
  NpyExport e;
  e.decoded = t.dequantized();
  if (t.dtype) {
    e.descr = npy_descr(*t.dtype, &e.widened);
    if (e.widened) e.how = t.stored_type + " widened exactly to float32";
  } else {
    e.descr = "<f4";
    e.how = t.stored_type + (t.packed() ? " decoded from its parts to float32"
                                      : " dequantized to float32, bit-identical to ggml");
  }
  const std::string preamble = npy_preamble(e.descr, t.shape);
  write_bytes(out, preamble.data(), preamble.size());
  if (t.dtype) write_dense(out, c, t, e.widened);
  else if (t.packed()) write_packed(out, c, t, *planner, threads);
  else write_ggml(out, c, t, *planner, threads);
  return e;
}

}  // namespace tmorph
