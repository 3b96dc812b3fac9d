// C++ statements of op contracts (op_contracts.h) that the core and every backend evaluate the same way:
// the quantile definition (TM_OP_STATS_QUANTILES), the identity of the moments partial
// (TM_OP_STATS_MOMENTS) and the checks of TM_OP_STEM_SSB_OVERLAP, TM_OP_DECODE_BITSHUFFLE_LZ4 and
// TM_OP_LOD_TILE_STATS and TM_OP_STEM_COMPACT_SUMS calls. Header-only, depends on the ABI alone, so a backend may include it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tensormorph/op_contracts.h"

namespace tmorph {

// The partial of an empty range: the identity of merge_moments (extremes at their neutral values).
inline tm_moments_partial_v1 empty_moments() {
  tm_moments_partial_v1 p{};
  p.min = std::numeric_limits<double>::infinity();
  p.max = -std::numeric_limits<double>::infinity();
  p.int_min = std::numeric_limits<int64_t>::max();
  p.int_max = std::numeric_limits<int64_t>::min();
  p.uint_min = std::numeric_limits<uint64_t>::max();
  p.uint_max = 0;
  return p;
}

// numpy's "linear" interpolation between neighbouring order statistics a <= b at fraction t,
// written the way numpy evaluates it so results match bit for bit.
inline double numpy_lerp(double a, double b, double t) {
  const double diff = b - a;
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}

// For probability p over n >= 1 sorted values: the lower order-statistic index and the fraction.
inline void quantile_position(double p, uint64_t n, uint64_t* k, double* t) {
  const double h = static_cast<double>(n - 1) * p;
  const double f = std::floor(h);
  *k = std::min<uint64_t>(static_cast<uint64_t>(f), n - 1);
  *t = h - f;
}

// The order statistics (0-based ranks, sorted, without repeats) that the quantiles at `probabilities`
// of n >= 1 sorted values read: each one's lower rank and the rank after it.
inline std::vector<uint64_t> ranks_read(const double* probabilities, size_t count, uint64_t n) {
  std::vector<uint64_t> ranks;
  for (size_t q = 0; q < count; ++q) {
    uint64_t k;
    double t;
    quantile_position(probabilities[q], n, &k, &t);
    ranks.push_back(k);
    if (k + 1 < n) ranks.push_back(k + 1);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

// The quantile p of n sorted values, given the value of any rank (0-based): the one definition every
// kernel evaluates, whatever way it finds its order statistics.
template <class ValueOfRank>
double quantile_of(double p, uint64_t n, ValueOfRank value_of_rank) {
  uint64_t k;
  double t;
  quantile_position(p, n, &k, &t);
  const double a = value_of_rank(k);
  const double b = k + 1 < n ? value_of_rank(k + 1) : a;
  return numpy_lerp(a, b, t);
}

// What is wrong with a TM_OP_STEM_SSB_OVERLAP call (op_contracts.h), or "" when it holds; every backend
// refuses the same calls with the same words before touching any array.
inline std::string ssb_call_problem(const tm_kernel_call_v1& c, const tm_stem_ssb_params_v1& p) {
  if (p.variant != TM_SSB_QUADRATIC && p.variant != TM_SSB_DIRECT) return "unknown variant " + std::to_string(p.variant);
  if (p.rows < 2 || p.cols < 2 || p.rows > (1u << 20) || p.cols > (1u << 20) || p.rows * p.cols > (uint64_t{1} << 31))
    return "scan " + std::to_string(p.rows) + " x " + std::to_string(p.cols) + " outside 2 .. 2^31 positions";
  const uint64_t half = p.rows * (p.cols / 2 + 1);
  if (p.pixels == 0 || p.slice_stride < half || p.pixels > (uint64_t{1} << 40) / p.slice_stride)
    return "pixels or slice_stride out of range";
  if (c.element_count != 2 * p.pixels * p.slice_stride)
    return "element_count must be 2 * pixels * slice_stride = " + std::to_string(2 * p.pixels * p.slice_stride);
  if (c.output_size < p.rows * p.cols * 32) return "output too small: need rows * cols * 32 bytes";
  if (!p.pixel_k || !p.dc || !p.nu) return "pixel_k, dc and nu are required";
  if (p.variant == TM_SSB_QUADRATIC && (!p.e_chi || !p.row_factor || !p.col_factor))
    return "the quadratic variant needs e_chi, row_factor and col_factor";
  if (p.variant == TM_SSB_DIRECT && p.chi_term_count && !p.chi_terms) return "chi_terms missing";
  if (!(p.kmax2 > 0) || !std::isfinite(p.kmax2)) return "kmax2 must be positive";
  return {};
}

// A TM_OP_DECODE_BITSHUFFLE_LZ4 call's params without masking.
inline tm_decode_bitshuffle_lz4_params_v1 decode_params(uint64_t chunk_count, uint64_t chunk_elements, const uint64_t* offsets) {
  tm_decode_bitshuffle_lz4_params_v1 p{};
  p.chunk_count = chunk_count, p.chunk_elements = chunk_elements, p.chunk_offsets = offsets;
  return p;
}

// The masking extension of a TM_OP_DECODE_BITSHUFFLE_LZ4 call (op_contracts.h): all zeros when params_size
// ends before it (the first version of the params).
struct DecodeMasking {
  uint32_t flags = 0;
  const uint32_t* zero_elements = nullptr;
  uint64_t zero_element_count = 0;
  uint64_t* all_ones_zeroed = nullptr;
  uint64_t* failed_chunk = nullptr;
};

inline DecodeMasking decode_masking(const tm_kernel_call_v1& c) {
  DecodeMasking m;
  if (c.params_size < sizeof(tm_decode_bitshuffle_lz4_params_v1)) return m;
  const auto& p = *static_cast<const tm_decode_bitshuffle_lz4_params_v1*>(c.params);
  m.flags = p.flags, m.zero_elements = p.zero_elements, m.zero_element_count = p.zero_element_count;
  m.all_ones_zeroed = p.all_ones_zeroed, m.failed_chunk = p.failed_chunk;
  return m;
}

// What is wrong with a TM_OP_DECODE_BITSHUFFLE_LZ4 call (op_contracts.h), or "" when it holds; every backend
// refuses the same calls with the same words before decoding anything. `element_size` is the dtype's width;
// `output_bytes` what the call may write (the host output, or the device buffer from output_offset on).
inline std::string decode_call_problem(const tm_kernel_call_v1& c, uint32_t element_size, uint64_t output_bytes) {
  if (!c.params || c.params_size < TM_DECODE_BITSHUFFLE_LZ4_PARAMS_BASE_SIZE) return "params missing";
  const auto& p = *static_cast<const tm_decode_bitshuffle_lz4_params_v1*>(c.params);
  if (p.chunk_count && !p.chunk_offsets) return "chunk offsets missing";
  if (element_size == 0 || p.chunk_elements == 0 || c.element_count > UINT64_MAX / element_size ||
      p.chunk_count > c.element_count / p.chunk_elements || p.chunk_count * p.chunk_elements != c.element_count)
    return "element_count " + std::to_string(c.element_count) + " is not chunk_count " + std::to_string(p.chunk_count) +
           " x chunk_elements " + std::to_string(p.chunk_elements);
  if (output_bytes < c.element_count * element_size)
    return "output of " + std::to_string(output_bytes) + " bytes, the chunks decode to " +
           std::to_string(c.element_count * element_size);
  for (uint64_t i = 0; i < p.chunk_count; ++i)
    if (p.chunk_offsets[i + 1] < p.chunk_offsets[i] || (i == 0 && p.chunk_offsets[0] != 0))
      return "chunk offsets must start at 0 and never decrease (chunk " + std::to_string(i) + ")";
  const DecodeMasking m = decode_masking(c);
  if (m.flags & ~uint32_t{TM_DECODE_ZERO_ALL_ONES}) return "unknown flags " + std::to_string(m.flags);
  if (m.zero_element_count && !m.zero_elements) return "zero_elements missing";
  for (uint64_t i = 0; i < m.zero_element_count; ++i)
    if (m.zero_elements[i] >= p.chunk_elements)
      return "zero_elements[" + std::to_string(i) + "] = " + std::to_string(m.zero_elements[i]) + " lies outside a chunk of " +
             std::to_string(p.chunk_elements) + " elements";
  return {};
}

// Whether TM_OP_LOD_TILE_STATS's `method` takes `dtype` (tm_dtype ids; op_contracts.h).
inline bool tile_stats_method_takes(uint32_t method, uint32_t dtype) {
  switch (method) {
    case TM_TILE_PATTERNS:
      return dtype == TM_DTYPE_BF16 || dtype == TM_DTYPE_F16 || dtype == TM_DTYPE_F8_E4M3FN || dtype == TM_DTYPE_F8_E5M2 ||
             dtype == TM_DTYPE_I8 || dtype == TM_DTYPE_U8 || dtype == TM_DTYPE_BOOL;
    case TM_TILE_SEGMENTS: return dtype == TM_DTYPE_F32 || dtype == TM_DTYPE_BF16 || dtype == TM_DTYPE_F16;
    case TM_TILE_WIDENED: return dtype > TM_DTYPE_INVALID && dtype < TM_DTYPE_COUNT_;
    default: return false;
  }
}

// What is wrong with a TM_OP_LOD_TILE_STATS call (op_contracts.h), or "" when it holds; every backend refuses
// the same calls with the same words before reading the input.
inline std::string tile_stats_problem(const tm_kernel_call_v1& c) {
  if (!c.params || c.params_size < sizeof(tm_tile_stats_params_v1)) return "params missing";
  const auto& p = *static_cast<const tm_tile_stats_params_v1*>(c.params);
  if (p.rows == 0 || p.cols == 0) return "a band of " + std::to_string(p.rows) + " x " + std::to_string(p.cols) + " elements";
  if (p.tile_cols == 0 || (p.tile_cols & (p.tile_cols - 1)) != 0)
    return "tile_cols " + std::to_string(p.tile_cols) + " is not a power of two";
  if (p.rows > TM_TILE_ELEMENTS / p.tile_cols)
    return "tiles of " + std::to_string(p.rows) + " x " + std::to_string(p.tile_cols) + " elements exceed " +
           std::to_string(TM_TILE_ELEMENTS);
  if (p.cols > UINT64_MAX / p.rows || c.element_count != p.rows * p.cols)
    return "element_count " + std::to_string(c.element_count) + " is not rows " + std::to_string(p.rows) + " x cols " +
           std::to_string(p.cols);
  const uint64_t tiles = (p.cols + p.tile_cols - 1) / p.tile_cols;
  if (c.output_size < tiles * sizeof(tm_tile_stats_v1))
    return "output of " + std::to_string(c.output_size) + " bytes, " + std::to_string(tiles) + " tiles need " +
           std::to_string(tiles * sizeof(tm_tile_stats_v1));
  if (!tile_stats_method_takes(p.method, static_cast<uint32_t>(c.dtype)))
    return "method " + std::to_string(p.method) + " does not take dtype " + std::to_string(static_cast<uint32_t>(c.dtype));
  return {};
}

// Applies the masking extension to one decoded chunk of n elements of type T; returns how many elements
// were all ones (and zeroed).
template <class T>
uint64_t mask_decoded_chunk(T* px, uint64_t n, const DecodeMasking& m) {
  uint64_t zeroed = 0;
  if (m.flags & TM_DECODE_ZERO_ALL_ONES) {
    const T ones = static_cast<T>(~T{0});
    for (uint64_t i = 0; i < n; ++i) {
      const bool s = px[i] == ones;
      zeroed += s;
      px[i] = s ? T{0} : px[i];
    }
  }
  for (uint64_t i = 0; i < m.zero_element_count; ++i) px[m.zero_elements[i]] = 0;
  return zeroed;
}

// Why a TM_OP_STEM_COMPACT_SUMS call breaks its contract before any page is read ("" when it does not): the params,
// the page directory against the input's size, the positions, the lists and the output's size. Every message names
// the field and what was expected. A page's own words are checked by the kernel that reads them.
inline std::string compact_sums_problem(const tm_kernel_call_v1& c) {
  const auto say = [](const std::string& what) { return "stem.compact_sums: " + what; };
  if (c.dtype != TM_DTYPE_U8) return say("the input is the compact image's bytes (dtype u8)");
  if (!c.params || c.params_size < sizeof(tm_stem_compact_sums_params_v1))
    return say("params must be a tm_stem_compact_sums_params_v1 (" + std::to_string(sizeof(tm_stem_compact_sums_params_v1)) +
               " bytes), got " + std::to_string(c.params_size));
  const auto& p = *static_cast<const tm_stem_compact_sums_params_v1*>(c.params);
  if (p.pixels_per_frame == 0 || p.pixels_per_frame >= (uint64_t{1} << 32) || p.cols == 0 || p.pixels_per_frame % p.cols)
    return say("pixels_per_frame " + std::to_string(p.pixels_per_frame) + " must be whole rows of cols " + std::to_string(p.cols) +
               " and below 2^32");
  if (p.key_bytes != 2 && p.key_bytes != 4) return say("key_bytes " + std::to_string(p.key_bytes) + " (expected 2 or 4)");
  if (p.key_bytes == 2 && p.pixels_per_frame > 65536) return say("key_bytes 2 for frames of more than 65,536 pixels");
  if (p.page_count == 0 || !p.page_first) return say("page_count must be at least 1 with page_first given");
  const uint64_t page = TM_STEM_COMPACT_PAGE_BYTES;
  if (c.element_count <= (uint64_t{p.page_count} - 1) * page || c.element_count > uint64_t{p.page_count} * page)
    return say("element_count " + std::to_string(c.element_count) + " bytes does not hold exactly page_count " +
               std::to_string(p.page_count) + " pages of at most " + std::to_string(page) + " bytes");
  if (p.page_first[0] != 0) return say("page_first[0] must be 0");
  for (uint32_t i = 0; i < p.page_count; ++i)
    if (p.page_first[i + 1] < p.page_first[i] || p.page_first[i + 1] - p.page_first[i] > page / 4)
      return say("page_first must be non-decreasing, a page holding at most " + std::to_string(page / 4) + " positions (page " +
                 std::to_string(i) + ")");
  if (p.position_count && !p.positions) return say("positions missing");
  const uint64_t held = p.page_first[p.page_count];
  for (uint64_t i = 0; i < p.position_count; ++i)
    if (p.positions[i] >= held)
      return say("positions[" + std::to_string(i) + "] = " + std::to_string(p.positions[i]) + " is not below the " +
                 std::to_string(held) + " positions the image holds");
  if (p.list_count > TM_STEM_COMPACT_MAX_LISTS)
    return say("list_count " + std::to_string(p.list_count) + " (at most " + std::to_string(TM_STEM_COMPACT_MAX_LISTS) + ")");
  if (p.list_count && !p.key_lists) return say("key_lists missing for list_count " + std::to_string(p.list_count));
  if (p.com_list != TM_STEM_ALL_PIXELS && p.com_list >= p.list_count) return say("com_list names no list");
  if (p.flags & ~TM_STEM_LISTS_ONLY) return say("unknown flags");
  if (p.pixel_of_key)
    for (uint64_t k = 0; k < p.pixels_per_frame; ++k)
      if (p.pixel_of_key[k] >= p.pixels_per_frame) return say("pixel_of_key[" + std::to_string(k) + "] lies outside the frame");
  if (p.list_ranges)
    for (uint32_t j = 0; j < p.list_count; ++j)
      if (p.list_ranges[2 * j] < p.list_ranges[2 * j + 1] && p.list_ranges[2 * j + 1] > p.pixels_per_frame)
        return say("list_ranges of list " + std::to_string(j) + " reach past the frame's " + std::to_string(p.pixels_per_frame) + " keys");
  const uint64_t need = p.position_count * (TM_STEM_FRAME_SUMS_FIXED + p.list_count) * sizeof(uint64_t);
  if (c.output_size < need)
    return say("output_size " + std::to_string(c.output_size) + " bytes, expected " + std::to_string(need));
  return "";
}

// The running total of a position's entries whose key is below x (0 when none): keys[0..count) strictly increasing,
// totals[k] the running total up to entry k. A binary search of at most 33 steps (TM_OP_STEM_COMPACT_SUMS's ranges).
template <class KeyAt, class TotalAt>
uint32_t compact_total_below(uint64_t count, uint32_t x, KeyAt key_at, TotalAt total_at) {
  uint64_t lo = 0, hi = count;  // the first entry whose key is >= x lies in [lo, hi]
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (key_at(mid) < x) lo = mid + 1;
    else hi = mid;
  }
  return lo == 0 ? 0u : total_at(lo - 1);
}

}  // namespace tmorph
