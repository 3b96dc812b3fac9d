// How far one tensor is from another (a quantized or lower-precision copy from its source): both read
// as float32 in pieces, the differences summed by the placed compare.diff_moments kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "tensormorph/placement.h"

namespace tmorph {

class Planner;

struct TensorDiff {
  uint64_t count = 0;      // element pairs
  uint64_t nonfinite = 0;  // pairs where either value is NaN or infinite (not in the figures below)
  double rmse = 0;         // sqrt(mean((b - a)^2))
  double max_abs = 0;      // max |b - a|
  double rel_error = 0;    // ||b - a|| / ||a||  (L2)
  double cosine = 0;       // a . b / (||a|| ||b||)
  double snr_db = 0;       // 10 log10(||a||^2 / ||b - a||^2); +inf when b == a
  std::vector<Placement> placement;
};

// Measures tensor b (of checkpoint cb) against reference a (of ca); their element counts must match.
// Dense dtypes are read exactly as float32 (f64 rounded to nearest); block formats are dequantized.
TensorDiff compare_tensors(const Checkpoint& ca, const CheckpointTensor& a, const Checkpoint& cb, const CheckpointTensor& b,
                           const Planner& planner, unsigned threads);

}  // namespace tmorph
