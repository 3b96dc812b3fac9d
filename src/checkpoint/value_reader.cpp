#include "checkpoint/value_reader.h"

#include <algorithm>

#include "lod/pyramid.h"
#include "checkpoint/ggml_quantized.h"
#include "checkpoint/packed_dequantize.h"
#include "checkpoint/tensor_stats.h"
#include "tensormorph/error.h"

namespace tmorph {

ValueReader::ValueReader(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner, const View2D& view)
    : c_(c), t_(t), view_(view) {
  if (auto why = unreadable_reason(t, planner)) throw Error(ErrorKind::Unavailable, t.name + ": " + *why);
  if (c.before_reading_span && Checkpoint::spanned_reads(t)) {
    span_tensor_ = position_of(c, t);  // its bytes are fetched as read (read())
  } else if (c.before_reading) {
    c.before_reading(position_of(c, t));
  }
  if (view.slices * view.rows * view.cols != t.elements)
    throw Error(ErrorKind::Internal, t.name + ": the view does not cover the tensor's elements");
  if (t.packed()) {
    packed_ = std::make_unique<PackedDecoder>(c, t, planner);
    placement_.push_back(packed_->placement());
  } else if (t.ggml_type()) {
    placement_.push_back(place_dequantize(planner, quantized_tensor(*t.ggml_type(), c.data(t), t.elements)));
  }
}

ValueReader::~ValueReader() = default;

size_t ValueReader::position_of(const Checkpoint& c, const CheckpointTensor& t) {
  const bool listed = !c.tensors.empty() && &t >= c.tensors.data() && &t < c.tensors.data() + c.tensors.size();
  return listed ? static_cast<size_t>(&t - c.tensors.data()) : c.position(t.name, t.name);
}

void ValueReader::ensure_span(uint64_t offset, uint64_t bytes) {
  for (const auto& s : spans_)
    if (offset >= s.covered_offset && offset + bytes <= s.covered_offset + s.covered_bytes) return;
  spans_.push_back(c_.before_reading_span(*span_tensor_, offset, bytes));
}

void ValueReader::read(uint64_t slice, uint64_t row, uint64_t col_begin, uint64_t col_end, double* out) {
  const uint64_t count = col_end - col_begin;
  if (t_.dtype) {
    const uint64_t first = (slice * view_.rows + row) * view_.cols + col_begin;
    if (span_tensor_ && count) ensure_span(first * dtype_size(*t_.dtype), count * dtype_size(*t_.dtype));
    decode_to_double(*t_.dtype, c_.data(t_) + first * dtype_size(*t_.dtype), count, out);
    return;
  }
  const float* src = read_decoded(slice, row, col_begin, col_end);
  for (uint64_t i = 0; i < count; ++i) out[i] = src[i];
}

const float* ValueReader::read_decoded(uint64_t slice, uint64_t row, uint64_t col_begin, uint64_t col_end) {
  if (t_.dtype) throw Error(ErrorKind::Internal, "ValueReader::read_decoded: " + t_.name + " is a dense tensor");
  const uint64_t first = (slice * view_.rows + row) * view_.cols + col_begin, count = col_end - col_begin;
  // Decoded pieces are cached: consecutive segments of one row (or of one packed logical row) decode once.
  if (first < scratch_first_ || first + count > scratch_first_ + scratch_count_) {
    if (packed_) {
      const uint64_t cols = packed_->cols(), r0 = first / cols, r1 = (first + count + cols - 1) / cols;
      scratch_.resize((r1 - r0) * cols);
      packed_->decode_rows(r0, r1 - r0, scratch_.data(), 1);
      scratch_first_ = r0 * cols, scratch_count_ = (r1 - r0) * cols;
    } else {
      const QuantizedTensor q = quantized_tensor(*t_.ggml_type(), c_.data(t_), t_.elements);
      // The whole view row around the segment, in whole blocks.
      const uint64_t row_first = first - col_begin, block = q.block_elements;
      const uint64_t b0 = row_first / block * block;
      const uint64_t b1 = std::min(t_.elements, (row_first + view_.cols + block - 1) / block * block);
      scratch_.resize(b1 - b0);
      dequantize_range(placement_.front(), q, b0, b1 - b0, scratch_.data(), 1);
      scratch_first_ = b0, scratch_count_ = b1 - b0;
    }
  }
  return scratch_.data() + (first - scratch_first_);
}

}  // namespace tmorph
