// Merging per-block moment partials, and the canonical merge tree that makes results independent
// of thread count and chunking.
#pragma once

#include <cstdint>
#include <vector>

#include "tensormorph/dtype.h"
#include "tensormorph/contract_math.h"
#include "tensormorph/op_contracts.h"
#include "tensormorph/stats.h"

namespace tmorph {

// Combines the partials of two adjacent ranges (a before b). Counts add; extremes combine; the sum
// is combined with an error-free transformation (TwoSum) so the compensation term carries what
// rounding dropped; mean and m2 follow Chan et al.:
//   n = na + nb, d = mean_b - mean_a, mean = mean_a + d*nb/n, m2 = m2_a + m2_b + d*d*na*nb/n.
// Not associative in floating point: callers use MomentsReducer's fixed tree.
tm_moments_partial_v1 merge_moments(const tm_moments_partial_v1& a, const tm_moments_partial_v1& b);

// Canonical reduction over canonical blocks 0, 1, 2, ... pushed in order. The result equals the
// fixed binary tree over block indices (node(k, i) covers blocks [i*2^k, (i+1)*2^k)), whatever the
// number of threads that computed the blocks or the chunks they arrived in.
class MomentsReducer {
 public:
  void push(const tm_moments_partial_v1& block);
  // Folds what is pending, right to left, exactly as the tree's partial right spine does.
  tm_moments_partial_v1 finish() const;

 private:
  // stack_[k] holds a complete node of 2^k blocks when bit k of pushed_ is set.
  std::vector<tm_moments_partial_v1> stack_;
  uint64_t pushed_ = 0;
};

// Final moments of a tensor, as reported.
struct Moments {
  uint64_t count = 0;         // all elements
  uint64_t finite_count = 0;  // the statistics below are over these
  uint64_t nan_count = 0, inf_count = 0, zero_count = 0;
  double min = 0, max = 0, abs_max = 0;
  double sum = 0;   // compensated sum of finite values, rounded once
  double mean = 0;  // sum / finite_count
  double std = 0;   // population standard deviation, sqrt(m2 / finite_count)
  double m2 = 0;
  bool is_integer = false;
  // Integer dtypes: exact values, as decimal strings (they may exceed double's 53 bits).
  std::string int_min, int_max, int_sum;
};

Moments finalize_moments(const tm_moments_partial_v1& p, DType dtype);

// The reported summary of final moments.
MomentsSummary summarize_moments(const Moments& m);

}  // namespace tmorph
