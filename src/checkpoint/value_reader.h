// Reads any readable checkpoint tensor's values as float64, one row segment of its 2-D view at a time:
// dense dtypes are decoded in place from the mapping, ggml block formats are dequantized (whole blocks
// around the segment, bit-identical to ggml) and packed schemes decoded a logical row at a time. Used
// for rendering and for pyramids of views other than the stored one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "lod/view.h"
#include "tensormorph/placement.h"

namespace tmorph {

class Planner;
class PackedDecoder;

class ValueReader {
 public:
  // Throws Unavailable when no backend here reads t (unreadable_reason).
  ValueReader(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner, const View2D& view);
  ~ValueReader();
  ValueReader(const ValueReader&) = delete;
  ValueReader& operator=(const ValueReader&) = delete;

  // Elements [col_begin, col_end) of row `row` of slice `slice` of the view, into out.
  void read(uint64_t slice, uint64_t row, uint64_t col_begin, uint64_t col_end, double* out);
  // The same elements of a quantized or packed tensor as they were decoded: float32, every value exact
  // (ggml and the packed schemes decode to float32). Valid until the next call; Internal error for a
  // dense tensor.
  const float* read_decoded(uint64_t slice, uint64_t row, uint64_t col_begin, uint64_t col_end);
  const View2D& view() const { return view_; }
  // The decoding placement for quantized and packed tensors; empty (no op) for dense dtypes.
  const std::vector<Placement>& placement() const { return placement_; }

 private:
  const Checkpoint& c_;
  const CheckpointTensor& t_;
  View2D view_;
  std::vector<Placement> placement_;
  std::unique_ptr<PackedDecoder> packed_;
  std::vector<float> scratch_;
  uint64_t scratch_first_ = ~uint64_t{0}, scratch_count_ = 0;  // flat elements held in scratch_
  // Checkpoint::before_reading_span: the tensor's position when its bytes are fetched as read, and the spans made
  // readable so far (each pinned until this reader goes).
  std::optional<size_t> span_tensor_;
  std::vector<Checkpoint::SpanRead> spans_;
  static size_t position_of(const Checkpoint& c, const CheckpointTensor& t);
  void ensure_span(uint64_t offset, uint64_t bytes);
};

}  // namespace tmorph
