#include "checkpoint/compare.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "checkpoint/ggml_quantized.h"
#include "ops/kernel_call.h"
#include "checkpoint/packed_dequantize.h"
#include "tensormorph/error.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/planner.h"

namespace tmorph {

namespace {

// Elements per piece: a multiple of every block size (32, 256) and of the canonical stats block.
constexpr uint64_t kPiece = uint64_t{1} << 20;

// One tensor read as float32, piece by piece.
class Float32Reader {
 public:
  Float32Reader(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner, unsigned threads)
      : t_(t), data_(c.data(t)), threads_(threads) {
    if (t.packed()) {
      packed_.emplace(c, t, planner);
      dequant_ = packed_->placement();
      return;
    }
    if (!t.dtype && !t.ggml_type()) t.refuse_unreadable();
    if (t.ggml_type()) {
      q_ = quantized_tensor(*t.ggml_type(), data_, t.elements);
      dequant_ = place_dequantize(planner, *q_);
    }
  }
  const std::optional<Placement>& placement() const { return dequant_; }

  void read(uint64_t first, uint64_t count, float* out) const {
    if (q_) return dequantize_range(*dequant_, *q_, first, count, out, threads_);
    if (packed_) return read_packed(first, count, out);
    const DType dt = *t_.dtype;
    const size_t w = dtype_size(dt);
    if (dt == DType::F32) {
      std::memcpy(out, data_ + first * 4, count * 4);
      return;
    }
    for (uint64_t i = 0; i < count; ++i) out[i] = static_cast<float>(element_to_double(dt, data_ + (first + i) * w));
  }

 private:
  // Packed schemes decode whole rows: the rows that cover the range, then the range copied out.
  void read_packed(uint64_t first, uint64_t count, float* out) const {
    const uint64_t cols = packed_->cols(), row0 = first / cols, row1 = (first + count + cols - 1) / cols;
    rows_.resize((row1 - row0) * cols);
    packed_->decode_rows(row0, row1 - row0, rows_.data(), threads_);
    std::memcpy(out, rows_.data() + (first - row0 * cols), count * sizeof(float));
  }

  const CheckpointTensor& t_;
  const uint8_t* data_;
  unsigned threads_;
  std::optional<PackedDecoder> packed_;
  mutable std::vector<float> rows_;
  std::optional<QuantizedTensor> q_;
  std::optional<Placement> dequant_;
};

}  // namespace

TensorDiff compare_tensors(const Checkpoint& ca, const CheckpointTensor& a, const Checkpoint& cb, const CheckpointTensor& b,
                           const Planner& planner, unsigned threads) {
  if (a.elements != b.elements)
    throw Error(ErrorKind::InvalidArgument, a.name + ": " + std::to_string(a.elements) + " elements against " +
                                                std::to_string(b.elements));
  const Float32Reader ra(ca, a, planner, threads), rb(cb, b, planner, threads);
  OpRequest req;
  req.op = TM_OP_DIFF_MOMENTS;
  req.dtype = DType::F32;
  req.elements = a.elements;
  req.bytes = a.elements * 8;
  const Placement diff = planner.place(req);
  TensorDiff out;
  for (const auto* r : {&ra, &rb})
    if (r->placement()) out.placement.push_back(*r->placement());
  out.placement.push_back(diff);

  std::vector<float> va(kPiece), vb(kPiece);
  std::vector<tm_diff_partial_v1> parts(kPiece / TM_STATS_BLOCK_ELEMENTS);
  double ssd = 0, saa = 0, sbb = 0, sab = 0;
  for (uint64_t first = 0; first < a.elements; first += kPiece) {
    const uint64_t n = std::min(kPiece, a.elements - first);
    ra.read(first, n, va.data());
    rb.read(first, n, vb.data());
    const tm_diff_params_v1 params{vb.data()};
    run_placed_kernel(diff, TM_OP_DIFF_MOMENTS,
                      {DType::F32, va.data(), n, &params, sizeof params, parts.data(), parts.size() * sizeof parts[0], threads});
    for (uint64_t k = 0; k < (n + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS; ++k) {  // in block order
      out.count += parts[k].count, out.nonfinite += parts[k].nonfinite;
      ssd += parts[k].sum_sq_diff, saa += parts[k].sum_sq_a, sbb += parts[k].sum_sq_b, sab += parts[k].sum_ab;
      out.max_abs = std::max(out.max_abs, parts[k].max_abs_diff);
    }
  }
  const double finite = static_cast<double>(out.count - out.nonfinite);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  out.rmse = finite > 0 ? std::sqrt(ssd / finite) : nan;
  out.rel_error = saa > 0 ? std::sqrt(ssd / saa) : (ssd == 0 ? 0 : nan);
  out.cosine = saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : nan;
  out.snr_db = ssd == 0 ? std::numeric_limits<double>::infinity() : (saa > 0 ? 10 * std::log10(saa / ssd) : nan);
  return out;
}

}  // namespace tmorph
