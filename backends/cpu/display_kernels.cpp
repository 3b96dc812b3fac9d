#include "display_kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "support/thread_pool.h"

namespace tmorph::cpu {

namespace {

constexpr uint64_t kPiece = 65536;  // values per piece (fixed, so counts never depend on threads)
constexpr double kInf = std::numeric_limits<double>::infinity();

// One piece: colours written, counts (259 slots) added.
void colorize_piece(const double* v, uint64_t n, const tm_display_colorize_params_v1& p, const uint32_t* lut,
                    uint8_t* rgba, uint64_t* counts) {
  const double* t = p.thresholds;
  const bool magnitude = p.key_mode == TM_DISPLAY_KEY_MAGNITUDE;
  for (uint64_t i = 0; i < n; ++i) {
    const double x = v[i];
    uint32_t word = 0;
    if (x != x) {
      ++counts[256];
    } else {
      const double key = magnitude ? std::fabs(x) : x;
      uint32_t k;
      if (key == kInf) k = 255;
      else if (key == -kInf) k = 0;
      else {
        // The number of thresholds <= key: a branch-free binary search over the 255 sorted thresholds.
        k = 0;
        for (uint32_t step = 128; step > 0; step /= 2) k += t[k + step - 1] <= key ? step : 0;
      }
      word = lut[k];
      if (x == kInf) ++counts[257];
      else if (x == -kInf) ++counts[258];
      else ++counts[k];
    }
    std::memcpy(rgba + 4 * i, &word, 4);
  }
}

}  // namespace

tm_status run_display_colorize(const tm_kernel_call_v1& c, std::string* error) {
  if (!c.params || c.params_size < sizeof(tm_display_colorize_params_v1))
    return *error = "display.colorize: params missing", TM_ERR_INVALID_ARGUMENT;
  const auto& p = *static_cast<const tm_display_colorize_params_v1*>(c.params);
  if (c.dtype != TM_DTYPE_F64) return *error = "display.colorize: values must be f64", TM_ERR_UNSUPPORTED;
  if (p.key_mode != TM_DISPLAY_KEY_VALUE && p.key_mode != TM_DISPLAY_KEY_MAGNITUDE)
    return *error = "display.colorize: unknown key mode " + std::to_string(p.key_mode), TM_ERR_INVALID_ARGUMENT;
  for (uint32_t i = 0; i < TM_DISPLAY_THRESHOLDS; ++i)
    if (std::isnan(p.thresholds[i]) || (i > 0 && p.thresholds[i] < p.thresholds[i - 1]))
      return *error = "display.colorize: thresholds must be non-decreasing and not NaN (threshold " + std::to_string(i) + ")",
             TM_ERR_INVALID_ARGUMENT;
  const uint64_t n = c.element_count;
  if (c.output_size < TM_DISPLAY_COLORIZE_COUNTS * sizeof(uint64_t) + n * 4)
    return *error = "display.colorize: output too small", TM_ERR_INVALID_ARGUMENT;
  if (!c.output) return *error = "display.colorize: null output", TM_ERR_INVALID_ARGUMENT;
  uint32_t lut[256];
  std::memcpy(lut, p.table, sizeof lut);
  auto* counts = static_cast<uint64_t*>(c.output);
  auto* rgba = static_cast<uint8_t*>(c.output) + TM_DISPLAY_COLORIZE_COUNTS * sizeof(uint64_t);
  const auto* v = static_cast<const double*>(c.input);
  const uint64_t pieces = (n + kPiece - 1) / kPiece;
  if (pieces <= 1 || c.threads <= 1) {
    colorize_piece(v, n, p, lut, rgba, counts);
    return TM_OK;
  }
  std::vector<std::array<uint64_t, TM_DISPLAY_COLORIZE_COUNTS>> partial(pieces);
  ThreadPool::shared(std::max(1u, c.threads)).parallel_for(pieces, [&](uint64_t begin, uint64_t end, unsigned) {
    for (uint64_t q = begin; q < end; ++q) {
      partial[q].fill(0);
      const uint64_t first = q * kPiece, m = std::min(kPiece, n - first);
      colorize_piece(v + first, m, p, lut, rgba + 4 * first, partial[q].data());
    }
  });
  for (const auto& part : partial)
    for (uint32_t s = 0; s < TM_DISPLAY_COLORIZE_COUNTS; ++s) counts[s] += part[s];
  return TM_OK;
}

}  // namespace tmorph::cpu
