#include "diff_kernel.h"

#include <algorithm>
#include <cmath>

#include "support/thread_pool.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

namespace {

// One canonical block, summed in element order (the contract's order, whatever the threads).
tm_diff_partial_v1 diff_block(const float* a, const float* b, uint64_t n) {
  tm_diff_partial_v1 p{};
  p.count = n;
  for (uint64_t i = 0; i < n; ++i) {
    const double x = a[i], y = b[i];
    if (!std::isfinite(x) || !std::isfinite(y)) {
      ++p.nonfinite;
      continue;
    }
    const double d = y - x;
    p.sum_sq_diff += d * d;
    p.max_abs_diff = std::max(p.max_abs_diff, std::fabs(d));
    p.sum_sq_a += x * x;
    p.sum_sq_b += y * y;
    p.sum_ab += x * y;
  }
  return p;
}

}  // namespace

tm_status run_diff_moments(const tm_kernel_call_v1& c, std::string* error) {
  if (c.params_size < sizeof(tm_diff_params_v1) || !c.params || !static_cast<const tm_diff_params_v1*>(c.params)->b) {
    *error = "compare.diff_moments: params missing";
    return TM_ERR_INVALID_ARGUMENT;
  }
  const uint64_t blocks = (c.element_count + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
  if (c.output_size < blocks * sizeof(tm_diff_partial_v1)) {
    *error = "compare.diff_moments: output too small";
    return TM_ERR_INVALID_ARGUMENT;
  }
  const auto* a = static_cast<const float*>(c.input);
  const float* b = static_cast<const tm_diff_params_v1*>(c.params)->b;
  auto* out = static_cast<tm_diff_partial_v1*>(c.output);
  auto run = [&](uint64_t first, uint64_t last, unsigned) {
    for (uint64_t k = first; k < last; ++k) {
      const uint64_t begin = k * TM_STATS_BLOCK_ELEMENTS, n = std::min<uint64_t>(TM_STATS_BLOCK_ELEMENTS, c.element_count - begin);
      out[k] = diff_block(a + begin, b + begin, n);
    }
  };
  if (c.threads <= 1 || blocks <= 1) run(0, blocks, 0);
  else ThreadPool::shared(c.threads).parallel_for(blocks, run);
  return TM_OK;
}

}  // namespace tmorph::cpu
