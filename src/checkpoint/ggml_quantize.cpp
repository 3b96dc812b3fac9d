#include "checkpoint/ggml_quantize.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

void store_u16(uint8_t* p, uint16_t v) { std::memcpy(p, &v, sizeof v); }
void store_u32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, sizeof v); }

void require_blocks(uint64_t n, uint64_t block, const char* type) {
  if (n % block)
    throw Error(ErrorKind::Internal, std::string("quantize ") + type + ": " + std::to_string(n) + " values are not a whole number of " +
                                         std::to_string(block) + "-value blocks");
}

// A block's values with the non-finite ones replaced (NaN by 0, +/-Inf by +/- the largest finite magnitude), so
// that scales come from finite values only.
void finite_copy(const float* x, int n, float* out) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i)
    if (std::isfinite(x[i])) amax = std::max(amax, std::fabs(x[i]));
  for (int i = 0; i < n; ++i) out[i] = std::isnan(x[i]) ? 0.0f : std::isinf(x[i]) ? std::copysign(amax, x[i]) : x[i];
}

// Round to nearest, ties to even, as ggml's nearest_int: adding 1.5 * 2^23 leaves the rounded integer in the low
// mantissa bits (exact for |v| < 2^22; callers clamp their codes, and larger |v| only reach the clamp). Inline, where
// lrintf is a library call.
inline int nearest(float v) {
  if (!(std::fabs(v) < 4194304.0f)) return v > 0 ? 4194304 : -4194304;  // out of range (or NaN): any clamped code
  const float shifted = v + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(shifted) & 0x007fffffu) - 0x00400000;
}

struct SubBlockFit {
  float scale = 0.0f;  // > 0, or 0 when the values are all equal
  float min = 0.0f;    // >= 0: x = scale * q - min
};

// Least-squared-error fit of x (n values) by scale * q - min with 4-bit codes q and min >= 0 (so the codes start at
// or below the smallest value and 0 is always within reach, as ggml keeps it). Candidate steps (max - lo) / (15 + t),
// t = -1.0, -0.9, ..., +1.0 (lo = min(0, smallest)); each candidate's codes are refitted by least squares and then
// re-quantized with the refitted scale; the candidate of least squared error wins.
SubBlockFit fit_sub_block(const float* x, int n) {
  float lo = 0.0f, hi = x[0];
  for (int i = 0; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
  if (hi <= lo) return {0.0f, -lo};  // all values equal lo (<= 0): x = -min
  SubBlockFit best{(hi - lo) / 15.0f, -lo};
  double best_err = std::numeric_limits<double>::infinity();
  int q[32];
  for (int step = 0; step <= 20; ++step) {
    const float inv = (15.0f + (-1.0f + 0.1f * static_cast<float>(step))) / (hi - lo);
    double sl = 0, sl2 = 0, sx = 0, slx = 0;
    for (int i = 0; i < n; ++i) {
      q[i] = std::clamp(nearest(inv * (x[i] - lo)), 0, 15);
      sl += q[i], sl2 += double(q[i]) * q[i], sx += x[i], slx += double(q[i]) * x[i];
    }
    // Minimise sum (s q + b - x)^2 over s, b; b = -min must stay <= 0.
    const double det = n * sl2 - sl * sl;
    if (det <= 0) continue;
    double s = (n * slx - sl * sx) / det, b = (sl2 * sx - sl * slx) / det;
    if (b > 0) b = 0, s = sl2 > 0 ? slx / sl2 : 0;
    if (!(s > 0)) continue;
    const SubBlockFit fit{static_cast<float>(s), static_cast<float>(-b)};
    double err = 0;
    const float inv_scale = 1.0f / fit.scale;
    for (int i = 0; i < n; ++i) {
      const int code = std::clamp(nearest((x[i] + fit.min) * inv_scale), 0, 15);
      const double e = double(fit.scale) * code - fit.min - x[i];
      err += e * e;
    }
    if (err < best_err) best_err = err, best = fit;
  }
  return best;
}

}  // namespace

uint16_t f32_to_fp16_bits(float f) {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN, quiet
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: rounds to infinity
  if (a >= 0x38800000u) {  // a normal half (>= 2^-14): re-bias, round the 13 dropped bits to nearest even
    const uint32_t r = a - (112u << 23);
    return static_cast<uint16_t>(sign | ((r + 0x0fffu + ((r >> 13) & 1u)) >> 13));
  }
  // A subnormal half (or zero): the value in units of 2^-24, rounded to nearest even (exact in float).
  const float units = std::bit_cast<float>(a) * 0x1p24f;
  return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(units)));
}

float fp16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t m = h & 0x7fffu;
  if (m >= 0x7c00u) return std::bit_cast<float>(sign | 0x7f800000u | ((m & 0x3ffu) << 13));
  if (m >= 0x0400u) return std::bit_cast<float>(sign | ((m << 13) + (112u << 23)));
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(static_cast<float>(m) * 0x1p-24f));
}

void quantize_q8_0(const float* x_in, uint64_t n, uint8_t* out) {
  require_blocks(n, 32, "Q8_0");
  float x[32];
  for (uint64_t b = 0; b < n / 32; ++b, x_in += 32, out += 34) {
    finite_copy(x_in, 32, x);
    float amax = 0.0f;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(out, f32_to_fp16_bits(d));
    for (int i = 0; i < 32; ++i) out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(std::round(x[i] * id), -127.0f, 127.0f)));
  }
}

void quantize_q5_0(const float* x_in, uint64_t n, uint8_t* out) {
  require_blocks(n, 32, "Q5_0");
  float x[32];
  for (uint64_t b = 0; b < n / 32; ++b, x_in += 32, out += 22) {
    finite_copy(x_in, 32, x);
    float amax = 0.0f, max = 0.0f;
    for (float v : x)
      if (std::fabs(v) > amax) amax = std::fabs(v), max = v;
    const float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(out, f32_to_fp16_bits(d));
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      // x * id lies in [-16, 16]: + 16.5 is in [0.5, 32.5] and truncation is a round-to-nearest of x / d + 16.
      const int q0 = std::min(31, static_cast<int>(x[j] * id + 16.5f));
      const int q1 = std::min(31, static_cast<int>(x[j + 16] * id + 16.5f));
      out[6 + j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>((q0 >> 4) & 1) << j;
      qh |= static_cast<uint32_t>((q1 >> 4) & 1) << (j + 16);
    }
    store_u32(out + 2, qh);
  }
}

void quantize_q4_k(const float* x_in, uint64_t n, uint8_t* out) {
  require_blocks(n, 256, "Q4_K");
  float x[256];
  for (uint64_t b = 0; b < n / 256; ++b, x_in += 256, out += 144) {
    for (int j = 0; j < 8; ++j) finite_copy(x_in + 32 * j, 32, x + 32 * j);
    SubBlockFit fits[8];
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; ++j) {
      fits[j] = fit_sub_block(x + 32 * j, 32);
      max_scale = std::max(max_scale, fits[j].scale), max_min = std::max(max_min, fits[j].min);
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f, inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    uint8_t* scales = out + 4;
    std::memset(scales, 0, 12);
    int sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = std::min(63, nearest(inv_scale * fits[j].scale));
      mn[j] = std::min(63, nearest(inv_min * fits[j].min));
      if (j < 4) {
        scales[j] = static_cast<uint8_t>(sc[j]);
        scales[j + 4] = static_cast<uint8_t>(mn[j]);
      } else {
        scales[j + 4] = static_cast<uint8_t>((sc[j] & 0x0F) | ((mn[j] & 0x0F) << 4));
        scales[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
        scales[j] |= static_cast<uint8_t>((mn[j] >> 4) << 6);
      }
    }
    const uint16_t d_bits = f32_to_fp16_bits(max_scale / 63.0f), dmin_bits = f32_to_fp16_bits(max_min / 63.0f);
    store_u16(out, d_bits);
    store_u16(out + 2, dmin_bits);
    // The codes, against the scale and min the reader will form (fp16 d and dmin times the 6-bit values).
    const float d = fp16_bits_to_f32(d_bits), dmin = fp16_bits_to_f32(dmin_bits);
    uint8_t codes[256];
    for (int j = 0; j < 8; ++j) {
      const float step = d * static_cast<float>(sc[j]), offset = dmin * static_cast<float>(mn[j]);
      const float inv_step = step > 0 ? 1.0f / step : 0.0f;
      for (int i = 0; i < 32; ++i) codes[32 * j + i] = static_cast<uint8_t>(std::clamp(nearest((x[32 * j + i] + offset) * inv_step), 0, 15));
    }
    uint8_t* qs = out + 16;
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l) qs[32 * c + l] = static_cast<uint8_t>(codes[64 * c + l] | (codes[64 * c + 32 + l] << 4));
  }
}

}  // namespace tmorph
