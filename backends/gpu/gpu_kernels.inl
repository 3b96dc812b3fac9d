// The GPU backends' kernels, one source for CUDA, HIP and the host emulation (host_grid.h states the
// rules they follow: 1-D grids, no shared memory or barriers; threads meet only through global memory
// between launches and through integer atomics, so their results do not depend on scheduling).
// Included once by each backend's translation unit; launchers take device pointers.
//
// Contracts are op_contracts.h's; every kernel here is exact (bit-identical to the CPU reference):
// integer counts and sums do not depend on order, and the moments follow the reference's 16-lane order.
#include <cmath>
#include <cstdint>

#include "gpu_values.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::gpu {

constexpr unsigned kThreads = 256;          // threads per block for element-wise kernels
constexpr unsigned kMaxGrid = 65535;        // grid-stride loops cover larger inputs
using u64 = unsigned long long;             // the type CUDA's and HIP's 64-bit atomicAdd take

__device__ inline uint64_t global_id() { return static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline uint64_t grid_threads() { return static_cast<uint64_t>(gridDim.x) * blockDim.x; }
inline unsigned grid_for(uint64_t work, unsigned threads = kThreads) {
  const uint64_t g = (work + threads - 1) / threads;
  return static_cast<unsigned>(g == 0 ? 1 : g > kMaxGrid ? kMaxGrid : g);
}

// ---- stats.histogram ------------------------------------------------------------------------------
// Slot of a finite x: bins for x < edges[0], bins + 1 for x > edges[bins], else the bin (numpy).
__device__ inline unsigned histogram_slot(double x, const double* edges, unsigned bins) {
  if (x < edges[0]) return bins;
  if (x > edges[bins]) return bins + 1;
  if (x == edges[bins]) return bins - 1;
  unsigned lo = 0, hi = bins + 1;  // upper_bound over edges[0..bins]
  while (lo < hi) {
    const unsigned mid = (lo + hi) / 2;
    if (edges[mid] <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo - 1;
}

__global__ void histogram_kernel(const unsigned char* data, uint64_t n, unsigned dt, const double* edges,
                                 unsigned bins, u64* counts) {
  for (uint64_t i = global_id(); i < n; i += grid_threads()) {
    unsigned cls;
    const double x = load_value(data, i, dt, &cls);
    if (cls == kFinite) atomicAdd(&counts[histogram_slot(x, edges, bins)], u64{1});
  }
}

// ---- stats.bitpattern_histogram -----------------------------------------------------------------------
__global__ void bitpattern_kernel(const unsigned char* data, uint64_t n, unsigned width, u64* counts) {
  for (uint64_t i = global_id(); i < n; i += grid_threads()) atomicAdd(&counts[load_bits(data, i, width)], u64{1});
}

// ---- stats.moments ------------------------------------------------------------------------------------
// Four launches per chunk, each thread one (block, lane) or one block at a time (grid-stride loops): lane sums in element order
// (lane l takes elements l, l + 16, ...), the pairwise lane reduction, the optional deviation pass, and
// its reduction: the order of backends/cpu/block_contract.h and the Vulkan shader moments.comp.
struct LaneSums {
  double sum, sq, lo, hi, amax, m2;
  int64_t isum, imin, imax;
  uint64_t nan, finite, zero;
};
struct BlockState {
  double mean;
  int second_pass;
};

__device__ inline double reduce_lane_values(double* l) {
  for (unsigned w = TM_STATS_LANES; w > 1; w /= 2)
    for (unsigned i = 0; i < w / 2; ++i) l[i] = l[2 * i] + l[2 * i + 1];
  return l[0];
}
__device__ inline double positive_infinity() { return bits_to_double(0x7FF0000000000000ull); }

__global__ void moments_lanes_kernel(const unsigned char* data, uint64_t n, unsigned dt, uint64_t blocks,
                                     LaneSums* lanes) {
  for (uint64_t t = global_id(); t < blocks * TM_STATS_LANES; t += grid_threads()) {
    const uint64_t block = t / TM_STATS_LANES, lane = t % TM_STATS_LANES;
    const uint64_t start = block * TM_STATS_BLOCK_ELEMENTS;
    const uint64_t count = n - start < TM_STATS_BLOCK_ELEMENTS ? n - start : TM_STATS_BLOCK_ELEMENTS;
    LaneSums s{0, 0, positive_infinity(), -positive_infinity(), 0, 0, 0, INT64_MAX, INT64_MIN, 0, 0, 0};
    if (dtype_is_float(dt)) {
      for (uint64_t i = lane; i < count; i += TM_STATS_LANES) {
        unsigned cls;
        const double x = load_value(data, start + i, dt, &cls);
        if (cls == kNan) { ++s.nan; continue; }
        if (cls == kInf) continue;
        if (x == 0.0) ++s.zero;
        ++s.finite;
        s.sum += x;
        s.sq += x * x;
        s.lo = min_of(s.lo, x), s.hi = max_of(s.hi, x), s.amax = max_of(s.amax, x < 0 ? -x : x);
      }
    } else {
      for (uint64_t i = lane; i < count; i += TM_STATS_LANES) {
        const int64_t x = load_int(data, start + i, dt);
        s.isum += x;
        s.imin = x < s.imin ? x : s.imin, s.imax = x > s.imax ? x : s.imax;
        if (x == 0) ++s.zero;
      }
    }
    lanes[t] = s;
  }
}

__global__ void moments_reduce_kernel(uint64_t n, unsigned dt, uint64_t blocks, const LaneSums* lanes,
                                      tm_moments_partial_v1* out, BlockState* state) {
  for (uint64_t block = global_id(); block < blocks; block += grid_threads()) {
    const LaneSums* l = lanes + block * TM_STATS_LANES;
    const uint64_t start = block * TM_STATS_BLOCK_ELEMENTS;
    const uint64_t count = n - start < TM_STATS_BLOCK_ELEMENTS ? n - start : TM_STATS_BLOCK_ELEMENTS;
    tm_moments_partial_v1 p;
    p.int_min = INT64_MAX, p.int_max = INT64_MIN, p.uint_min = UINT64_MAX, p.uint_max = 0;
    p.int_sum_lo = 0, p.int_sum_hi = 0, p.sum_err = 0, p.m2 = 0;
    p.count = count;
    if (dtype_is_float(dt)) {
      uint64_t nans = 0, fin = 0, zeros = 0;
      double mn = positive_infinity(), mx = -positive_infinity(), am = 0, sums[TM_STATS_LANES], sqs[TM_STATS_LANES];
      for (unsigned i = 0; i < TM_STATS_LANES; ++i) {
        nans += l[i].nan, fin += l[i].finite, zeros += l[i].zero;
        mn = min_of(mn, l[i].lo), mx = max_of(mx, l[i].hi), am = max_of(am, l[i].amax);
        sums[i] = l[i].sum, sqs[i] = l[i].sq;
      }
      const double total = reduce_lane_values(sums), total_sq = reduce_lane_values(sqs);
      const double mean = fin > 0 ? total / static_cast<double>(fin) : 0.0;
      p.finite_count = fin, p.nan_count = nans, p.inf_count = count - fin - nans, p.zero_count = zeros;
      p.min = fin > 0 ? mn : positive_infinity(), p.max = fin > 0 ? mx : -positive_infinity();
      p.abs_max = fin > 0 ? am : 0.0;
      p.sum = total, p.mean = mean;
      // Single-pass m2 only for floats narrower than f64 (their squares are exact) when the product keeps
      // at least half of sumsq (block_contract.h single_pass_m2); else the deviation pass.
      const double s_mean = total * mean;
      const bool single = dt != TM_DTYPE_F64 && s_mean <= total_sq / 2;
      if (single) p.m2 = total_sq - s_mean;
      state[block] = BlockState{mean, single ? 0 : 1};
    } else {
      int64_t total = 0, mn = INT64_MAX, mx = INT64_MIN;
      uint64_t zeros = 0;
      for (unsigned i = 0; i < TM_STATS_LANES; ++i) {
        total += l[i].isum, zeros += l[i].zero;
        mn = l[i].imin < mn ? l[i].imin : mn, mx = l[i].imax > mx ? l[i].imax : mx;
      }
      // |total| < 2^53 for the dtypes taken here (at most 65,536 values of 32 bits): exact in double, and
      // one division rounds the exact mean once, as the CPU reference does.
      const double mean = static_cast<double>(total) / static_cast<double>(count);
      p.finite_count = count, p.nan_count = 0, p.inf_count = 0, p.zero_count = zeros;
      p.min = static_cast<double>(mn), p.max = static_cast<double>(mx);
      const double amn = p.min < 0 ? -p.min : p.min, amx = p.max < 0 ? -p.max : p.max;
      p.abs_max = amn < amx ? amx : amn;
      p.sum = static_cast<double>(total), p.mean = mean;
      if (dtype_is_signed_int(dt)) p.int_min = mn, p.int_max = mx;
      else p.uint_min = static_cast<uint64_t>(mn), p.uint_max = static_cast<uint64_t>(mx);
      p.int_sum_lo = static_cast<uint64_t>(total), p.int_sum_hi = total < 0 ? -1 : 0;
      state[block] = BlockState{mean, 1};
    }
    out[block] = p;
  }
}

__global__ void moments_deviation_kernel(const unsigned char* data, uint64_t n, unsigned dt, uint64_t blocks,
                                         const BlockState* state, LaneSums* lanes) {
  for (uint64_t t = global_id(); t < blocks * TM_STATS_LANES; t += grid_threads()) {
    const uint64_t block = t / TM_STATS_LANES, lane = t % TM_STATS_LANES;
    if (!state[block].second_pass) continue;
    const uint64_t start = block * TM_STATS_BLOCK_ELEMENTS;
    const uint64_t count = n - start < TM_STATS_BLOCK_ELEMENTS ? n - start : TM_STATS_BLOCK_ELEMENTS;
    const double mean = state[block].mean;
    double m2 = 0;
    for (uint64_t i = lane; i < count; i += TM_STATS_LANES) {
      unsigned cls;
      const double x = load_value(data, start + i, dt, &cls);
      if (cls != kFinite) continue;
      const double d = x - mean;
      m2 += d * d;
    }
    lanes[t].m2 = m2;
  }
}

__global__ void moments_finish_kernel(uint64_t blocks, const BlockState* state, const LaneSums* lanes,
                                      tm_moments_partial_v1* out) {
  for (uint64_t block = global_id(); block < blocks; block += grid_threads()) {
    if (!state[block].second_pass) continue;
    double m2[TM_STATS_LANES];
    for (unsigned i = 0; i < TM_STATS_LANES; ++i) m2[i] = lanes[block * TM_STATS_LANES + i].m2;
    out[block].m2 = reduce_lane_values(m2);
  }
}

// ---- stats.quantiles (exact): radix counting over order keys ----------------------------------------------
// A finite element's order key is an unsigned integer whose order is the values' (floats: negative values
// all bits flipped, the others the sign bit set, so -0 sorts just below +0; signed ints: the sign bit flipped).
// Pass p counts digit p (16 bits, most significant first) of the keys whose higher digits equal one of the
// sorted `targets` prefixes: counts[t * 65536 + digit]. Pass 0 has one empty prefix (every finite key).
__host__ __device__ inline bool order_key(const unsigned char* data, uint64_t i, unsigned dt, uint64_t* key) {
  const unsigned width = dtype_width(dt);
  const uint64_t b = load_bits(data, i, width);
  const uint64_t sign = uint64_t{1} << (8 * width - 1);
  if (dt == TM_DTYPE_F32 || dt == TM_DTYPE_F64) {
    unsigned cls;
    load_value(data, i, dt, &cls);
    const uint64_t mask = width == 8 ? ~uint64_t{0} : (uint64_t{1} << 32) - 1;
    *key = (b & sign) ? (~b & mask) : (b | sign);
    return cls == kFinite;
  }
  *key = (dt == TM_DTYPE_I32 || dt == TM_DTYPE_I64) ? (b ^ sign) : b;
  return true;
}

__global__ void radix_count_kernel(const unsigned char* data, uint64_t n, unsigned dt, unsigned key_bits, unsigned pass,
                                   const uint64_t* targets, unsigned target_count, u64* counts) {
  const unsigned digit_shift = key_bits - 16 * (pass + 1);
  for (uint64_t i = global_id(); i < n; i += grid_threads()) {
    uint64_t key;
    if (!order_key(data, i, dt, &key)) continue;
    const unsigned digit = static_cast<unsigned>((key >> digit_shift) & 0xFFFF);
    unsigned t = 0;
    if (pass > 0) {
      const uint64_t prefix = key >> (digit_shift + 16);
      unsigned lo = 0, hi = target_count;
      while (lo < hi) {
        const unsigned mid = (lo + hi) / 2;
        if (targets[mid] < prefix) lo = mid + 1;
        else hi = mid;
      }
      if (lo == target_count || targets[lo] != prefix) continue;
      t = lo;
    }
    atomicAdd(&counts[uint64_t{t} * 65536 + digit], u64{1});
  }
}

// ---- stem.frame_sums ------------------------------------------------------------------------------------
// Thread (frame, segment) adds every kSegments-th pixel (or list entry) of its frame and adds its share
// to the frame's uint64 sums atomically: integer sums, so the result is the CPU's whatever the order.
constexpr unsigned kFrameSegments = 64;

__global__ void frame_sums_kernel(const unsigned char* data, uint64_t frames, unsigned dt, uint64_t pixels,
                                  unsigned cols, unsigned list_count, const uint64_t* list_offsets,
                                  const uint32_t* list_pixels, unsigned com_list, unsigned flags, u64* out) {
  for (uint64_t t = global_id(); t < frames * kFrameSegments; t += grid_threads()) {
    const uint64_t frame = t / kFrameSegments, seg = t % kFrameSegments;
    const unsigned width = dtype_width(dt);
    const unsigned char* f = data + frame * pixels * width;
    u64* row = out + frame * (TM_STEM_FRAME_SUMS_FIXED + list_count);
    if (!(flags & TM_STEM_LISTS_ONLY)) {
      u64 total = 0, w = 0, sr = 0, sc = 0;
      for (uint64_t i = seg; i < pixels; i += kFrameSegments) {
        const u64 v = load_bits(f, i, width);
        total += v;
        if (com_list == TM_STEM_ALL_PIXELS) w += v, sr += (i / cols) * v, sc += (i % cols) * v;
      }
      if (com_list != TM_STEM_ALL_PIXELS)
        for (uint64_t k = list_offsets[com_list] + seg; k < list_offsets[com_list + 1]; k += kFrameSegments) {
          const uint64_t i = list_pixels[k];
          const u64 v = load_bits(f, i, width);
          w += v, sr += (i / cols) * v, sc += (i % cols) * v;
        }
      atomicAdd(&row[0], total), atomicAdd(&row[1], w), atomicAdd(&row[2], sr), atomicAdd(&row[3], sc);
    }
    for (unsigned j = 0; j < list_count; ++j) {
      u64 s = 0;
      for (uint64_t k = list_offsets[j] + seg; k < list_offsets[j + 1]; k += kFrameSegments)
        s += load_bits(f, list_pixels[k], width);
      atomicAdd(&row[TM_STEM_FRAME_SUMS_FIXED + j], s);
    }
  }
}

// ---- stem.compact_sums ----------------------------------------------------------------------------------
// Thread (job, segment) adds every kFrameSegments-th entry of its position (value = the difference of two uint32
// running totals) and adds its share to the job's uint64 sums atomically: integer sums, the CPU's in any order.
// Every read is checked against the page first; a position whose words break the contract adds 1 to its row's last
// slot (row_values + 1 slots per job), which the host turns into an error. Pages are 4-byte aligned (4 MiB apart).
__global__ void compact_sums_kernel(const unsigned char* image, uint64_t image_bytes, uint64_t jobs, const uint32_t* job_page,
                                    const uint32_t* job_local, uint64_t pixels, unsigned cols, unsigned key_bytes,
                                    unsigned list_count, const uint64_t* key_lists, const uint32_t* pixel_of_key,
                                    unsigned com_list, unsigned flags, const uint32_t* list_ranges, u64* out) {
  for (uint64_t t = global_id(); t < jobs * kFrameSegments; t += grid_threads()) {
    const uint64_t job = t / kFrameSegments, seg = t % kFrameSegments;
    const uint64_t row_values = TM_STEM_FRAME_SUMS_FIXED + list_count;
    u64* row = out + job * (row_values + 1);
    const uint64_t at = uint64_t{job_page[job]} * TM_STEM_COMPACT_PAGE_BYTES;
    const uint32_t* w = reinterpret_cast<const uint32_t*>(image + at);
    const uint64_t page_bytes = image_bytes - at < TM_STEM_COMPACT_PAGE_BYTES ? image_bytes - at : TM_STEM_COMPACT_PAGE_BYTES;
    const uint64_t words = page_bytes / 4, j = job_local[job];
    const uint64_t n = words >= 2 ? w[0] : 0, e = words >= 2 ? w[1] : 0;
    const uint64_t keys_at = 3 + n, totals_at = keys_at + (key_bytes == 2 ? (e + 1) / 2 : e);
    const bool page_ok = words >= 2 && j < n && totals_at + e <= words;
    const uint64_t first = page_ok ? w[2 + j] : 0, last = page_ok ? w[3 + j] : 0;
    if (!page_ok || first > last || last > e) {
      if (seg == 0) atomicAdd(&row[row_values], u64{1});
      continue;
    }
    const uint16_t* keys16 = reinterpret_cast<const uint16_t*>(w + keys_at);
    const bool fixed = !(flags & TM_STEM_LISTS_ONLY);
    u64 total = 0, weight = 0, sr = 0, sc = 0, bad = 0, in_list[TM_STEM_COMPACT_MAX_LISTS];
    uint64_t by_entry = list_count == 64 ? ~uint64_t{0} : (uint64_t{1} << list_count) - 1;
    for (unsigned l = 0; l < list_count; ++l) {
      in_list[l] = 0;
      const uint32_t lo = list_ranges ? list_ranges[2 * l] : 0, hi = list_ranges ? list_ranges[2 * l + 1] : 0;
      if (lo >= hi) continue;
      by_entry &= ~(uint64_t{1} << l);
      if (seg != 0) continue;
      // A key range: the running totals below hi and below lo, each by a binary search over the increasing keys.
      uint32_t below[2];
      for (int b = 0; b < 2; ++b) {
        const uint32_t x = b ? hi : lo;
        uint64_t a = first, z = last;
        while (a < z) {
          const uint64_t mid = a + (z - a) / 2;
          if ((key_bytes == 2 ? uint32_t{keys16[mid]} : w[keys_at + mid]) < x) a = mid + 1;
          else z = mid;
        }
        below[b] = a == first ? 0u : w[totals_at + a - 1];
      }
      in_list[l] = below[1] - below[0];
    }
    for (uint64_t k = first + seg; k < last; k += kFrameSegments) {
      const uint64_t key = key_bytes == 2 ? keys16[k] : w[keys_at + k];
      if (key >= pixels) {
        bad = 1;
        continue;
      }
      const uint32_t value = w[totals_at + k] - (k == first ? 0u : w[totals_at + k - 1]);
      const uint64_t member = list_count ? key_lists[key] : 0;
      total += value;
      if (fixed && (com_list == TM_STEM_ALL_PIXELS || ((member >> com_list) & 1))) {
        const uint64_t pixel = pixel_of_key ? pixel_of_key[key] : key;
        weight += value, sr += u64{value} * (pixel / cols), sc += u64{value} * (pixel % cols);
      }
      for (unsigned l = 0; l < list_count; ++l) in_list[l] += ((member & by_entry) >> l) & 1 ? u64{value} : u64{0};
    }
    for (unsigned l = 0; l < list_count; ++l)
      if (in_list[l]) atomicAdd(&row[TM_STEM_FRAME_SUMS_FIXED + l], in_list[l]);
    if (fixed) atomicAdd(&row[0], total), atomicAdd(&row[1], weight), atomicAdd(&row[2], sr), atomicAdd(&row[3], sc);
    if (bad) atomicAdd(&row[row_values], u64{1});
  }
}

// ---- stem.pattern_reduce ------------------------------------------------------------------------------
// Thread per pixel: adds its value over every frame to sums and keeps the maximum (accumulated).
__global__ void pattern_reduce_kernel(const unsigned char* data, uint64_t frames, unsigned dt, uint64_t pixels,
                                      u64* sums, uint32_t* maxima) {
  const unsigned width = dtype_width(dt);
  for (uint64_t p = global_id(); p < pixels; p += grid_threads()) {
    u64 s = sums[p];
    uint32_t m = maxima[p];
    for (uint64_t f = 0; f < frames; ++f) {
      const uint64_t v = load_bits(data, f * pixels + p, width);
      s += v;
      m = v > m ? static_cast<uint32_t>(v) : m;
    }
    sums[p] = s, maxima[p] = m;
  }
}

// ---- display.colorize ---------------------------------------------------------------------------------
__global__ void colorize_kernel(const double* values, uint64_t n, const tm_display_colorize_params_v1* params,
                                u64* counts, unsigned char* rgba) {
  for (uint64_t i = global_id(); i < n; i += grid_threads()) {
    const double x = values[i];
    unsigned k;
    if (x != x) {
      atomicAdd(&counts[256], u64{1});
      rgba[4 * i] = rgba[4 * i + 1] = rgba[4 * i + 2] = rgba[4 * i + 3] = 0;
      continue;
    }
    const double key = params->key_mode == TM_DISPLAY_KEY_MAGNITUDE && x < 0 ? -x : x;
    const bool infinite = key - key != 0.0;
    if (infinite) {
      k = key > 0 ? 255 : 0;
      atomicAdd(&counts[x > 0 ? 257 : 258], u64{1});
    } else {
      unsigned lo = 0, hi = TM_DISPLAY_THRESHOLDS;  // the number of thresholds <= key
      while (lo < hi) {
        const unsigned mid = (lo + hi) / 2;
        if (params->thresholds[mid] <= key) lo = mid + 1;
        else hi = mid;
      }
      k = lo;
      atomicAdd(&counts[k], u64{1});
    }
    for (unsigned c = 0; c < 4; ++c) rgba[4 * i + c] = params->table[k][c];
  }
}

// ---- dequantize.ggml: ggml's 32-element legacy blocks ---------------------------------------------------
// Each output is formed as ggml forms it: the integer level converted to float, times the scale, plus the
// min where the format has one (float32 operations, no fused multiply-add: nvcc runs with -fmad=false,
// clang with -ffp-contract=off).
enum : unsigned { kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8 };
__host__ __device__ inline unsigned legacy_block_bytes(unsigned type) {
  switch (type) {
    case kQ4_0: return 18;
    case kQ4_1: return 20;
    case kQ5_0: return 22;
    case kQ5_1: return 24;
    case kQ8_0: return 34;
    default: return 0;
  }
}
__device__ inline float load_half(const unsigned char* p) {
  unsigned cls;
  const uint16_t bits = static_cast<uint16_t>(p[0] | (p[1] << 8));
  const double v = load_value(reinterpret_cast<const unsigned char*>(&bits), 0, TM_DTYPE_F16, &cls);
  if (cls == kFinite) return static_cast<float>(v);
  const uint32_t f = (bits & 0x8000u) << 16 | 0x7F800000u | ((bits & 0x3FFu) << 13);  // ±Inf, NaN payload kept
  float out;
  memcpy(&out, &f, sizeof out);
  return out;
}
__device__ inline uint32_t load_u32_le(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}

// Thread per output element.
__global__ void dequantize_legacy_kernel(const unsigned char* blocks, uint64_t n, unsigned type, float* out) {
  const unsigned bytes = legacy_block_bytes(type);
  for (uint64_t i = global_id(); i < n; i += grid_threads()) {
    const unsigned char* b = blocks + (i / 32) * bytes;
    const unsigned j = static_cast<unsigned>(i % 32), byte = j % 16;
    const bool high = j >= 16;
    switch (type) {
      case kQ4_0: {
        const int q = high ? b[2 + byte] >> 4 : b[2 + byte] & 0x0F;
        out[i] = static_cast<float>(q - 8) * load_half(b);
        break;
      }
      case kQ4_1: {
        const int q = high ? b[4 + byte] >> 4 : b[4 + byte] & 0x0F;
        const float prod = static_cast<float>(q) * load_half(b);
        out[i] = prod + load_half(b + 2);
        break;
      }
      case kQ5_0: {
        const uint32_t qh = load_u32_le(b + 2);
        const int q = (high ? b[6 + byte] >> 4 : b[6 + byte] & 0x0F) | static_cast<int>((qh >> j) & 1u) << 4;
        out[i] = static_cast<float>(q - 16) * load_half(b);
        break;
      }
      case kQ5_1: {
        const uint32_t qh = load_u32_le(b + 4);
        const int q = (high ? b[8 + byte] >> 4 : b[8 + byte] & 0x0F) | static_cast<int>((qh >> j) & 1u) << 4;
        const float prod = static_cast<float>(q) * load_half(b);
        out[i] = prod + load_half(b + 2);
        break;
      }
      default: {  // Q8_0
        out[i] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * load_half(b);
        break;
      }
    }
  }
}

// ---- quant.moments: Q4_0 and Q8_0 moments from codes and scales, exact ----------------------------------
// The CPU's arithmetic (backends/cpu/quant_moments_kernel.cpp): an fp16 scale is m * 2^(shift - 24) with
// m < 2^11 and shift <= 29, so each block adds the integer m * sum(q) << shift to sum(x) * 2^24 and
// m^2 * sum(q^2) << 2 * shift to sum(x^2) * 2^48. Launch 1, a thread per ggml block, adds those to its
// canonical block's totals with integer atomics (order-free); launch 2, a thread per canonical block,
// finds min and max walking its ggml blocks in order (the CPU's rule: only blocks whose scale could pass
// the running extremes are decoded) and rounds the exact sums as the CPU does.
struct QuantTotals {
  u64 sum;             // sum(x) * 2^24, two's complement (|total| < 2^63 for 2,048 blocks)
  u64 sq_lo, sq_hi;    // sum(x^2) * 2^48, 128 bits
  u64 finite, nan, inf, zeros;
};
__device__ inline int32_t quant_code(unsigned type, const unsigned char* block, unsigned i) {
  return type == kQ8_0 ? static_cast<int8_t>(block[2 + i])
                       : static_cast<int32_t>((block[2 + i % 16] >> (i < 16 ? 0 : 4)) & 0x0f) - 8;
}

__global__ void quant_moments_blocks_kernel(const unsigned char* blocks, uint64_t n, unsigned type, QuantTotals* totals) {
  const unsigned bytes = legacy_block_bytes(type);
  for (uint64_t b = global_id(); b < n; b += grid_threads()) {
    const unsigned char* block = blocks + b * bytes;
    QuantTotals& t = totals[b / (TM_STATS_BLOCK_ELEMENTS / 32)];
    int32_t sum = 0, sum_sq = 0, zeros = 0;
    for (unsigned i = 0; i < 32; ++i) {
      const int32_t q = quant_code(type, block, i);
      sum += q, sum_sq += q * q, zeros += q == 0;
    }
    const uint32_t h = block[0] | static_cast<uint32_t>(block[1]) << 8;
    const uint32_t exponent = (h >> 10) & 31u, fraction = h & 1023u;
    if (exponent == 31) {  // inf or NaN scale: inf * 0 is NaN, inf * q is +-inf, NaN * q is NaN
      if (fraction) atomicAdd(&t.nan, u64{32});
      else atomicAdd(&t.nan, u64(zeros)), atomicAdd(&t.inf, u64(32 - zeros));
      continue;
    }
    const int64_t m = exponent ? 1024 + fraction : fraction;
    const unsigned shift = exponent ? exponent - 1 : 0, twice = 2 * shift;
    const int64_t t1 = (h & 0x8000u) ? -(m * sum) : m * sum;
    atomicAdd(&t.sum, static_cast<u64>(t1) << shift);
    const u64 x = static_cast<u64>(m * m) * static_cast<u64>(sum_sq);  // < 2^41
    const u64 lo = x << twice, hi = twice ? x >> (64 - twice) : 0;
    const u64 before = atomicAdd(&t.sq_lo, lo);
    atomicAdd(&t.sq_hi, hi + (before + lo < before ? 1 : 0));  // the carry out of the low word
    atomicAdd(&t.finite, u64{32});
    atomicAdd(&t.zeros, m ? u64(zeros) : u64{32});
  }
}

// The largest fp16 magnitude (bits, sign cleared) whose value is <= v; 0 for v <= 0 or NaN.
__device__ inline uint32_t fp16_magnitude_at_most(float v) {
  if (!(v > 0)) return 0;
  if (v >= 65504.0f) return 0x7bffu;
  uint32_t bits;
  memcpy(&bits, &v, sizeof bits);
  const int exponent = static_cast<int>(bits >> 23) - 127;
  if (exponent < -24) return 0;
  if (exponent < -14) return static_cast<uint32_t>(v * 0x1p24f);  // subnormal: m * 2^-24, truncated
  return static_cast<uint32_t>(exponent + 15) << 10 | (bits & 0x7fffffu) >> 13;
}
// An unsigned 128-bit integer rounded to the nearest double (ties to even), without a device conversion
// routine for 128-bit types: the top 64 bits with the rest folded into a sticky bit round exactly alike.
__device__ inline double u128_to_double(unsigned __int128 v) {
  const u64 hi = static_cast<u64>(v >> 64), lo = static_cast<u64>(v);
  if (hi == 0) return static_cast<double>(lo);
  unsigned s = 64;  // bits of hi
  while (!(hi >> (s - 1))) --s;
  const u64 top = (s == 64 ? hi : hi << (64 - s) | lo >> s) | ((s == 64 ? lo : lo << (64 - s)) != 0 ? 1 : 0);
  return ldexp(static_cast<double>(top), static_cast<int>(s));
}

__global__ void quant_moments_finish_kernel(const unsigned char* blocks, uint64_t n, unsigned type, const QuantTotals* totals,
                                            uint64_t canonical, tm_moments_partial_v1* out) {
  constexpr uint64_t kPer = TM_STATS_BLOCK_ELEMENTS / 32;
  const unsigned bytes = legacy_block_bytes(type);
  const float max_code = type == kQ8_0 ? 128.0f : 8.0f;
  for (uint64_t k = global_id(); k < canonical; k += grid_threads()) {
    const QuantTotals& t = totals[k];
    const uint64_t first = k * kPer, count = n - first < kPer ? n - first : kPer;
    tm_moments_partial_v1 p;
    memset(&p, 0, sizeof p);
    p.count = count * 32, p.finite_count = t.finite, p.nan_count = t.nan, p.inf_count = t.inf, p.zero_count = t.zeros;
    p.min = positive_infinity(), p.max = -positive_infinity();
    if (t.finite) {
      float lo = static_cast<float>(positive_infinity()), hi = -lo;
      uint32_t threshold = 0;
      for (uint64_t b = first; b < first + count; ++b) {
        const unsigned char* block = blocks + b * bytes;
        const uint32_t h = block[0] | static_cast<uint32_t>(block[1]) << 8;
        if (((h >> 10) & 31u) == 31 || (h & 0x7fffu) < threshold) continue;
        const float d = load_half(block);
        int32_t qlo = 127, qhi = -128;
        for (unsigned i = 0; i < 32; ++i) {
          const int32_t q = quant_code(type, block, i);
          qlo = q < qlo ? q : qlo, qhi = q > qhi ? q : qhi;
        }
        const float a = d * static_cast<float>(qlo), c = d * static_cast<float>(qhi);
        const float mn = c < a ? c : a, mx = a < c ? c : a;  // std::min / std::max
        lo = mn < lo ? mn : lo, hi = hi < mx ? mx : hi;
        const float nearer = hi < -lo ? hi : -lo;
        threshold = fp16_magnitude_at_most(nearer / max_code);
      }
      p.min = lo, p.max = hi;
      const double amin = fabs(p.min), amax = fabs(p.max);
      p.abs_max = amin < amax ? amax : amin;  // std::max
      const int64_t s1 = static_cast<int64_t>(t.sum);
      const double scaled = static_cast<double>(s1);  // rounded to nearest
      // The exact remainder s1 - scaled (scaled may be 2^63, one past int64).
      const int64_t rest = scaled >= 9223372036854775808.0 ? (s1 - (int64_t{1} << 62)) - (int64_t{1} << 62)
                                                            : s1 - static_cast<int64_t>(scaled);
      p.sum = ldexp(scaled, -24);
      p.sum_err = ldexp(static_cast<double>(rest), -24);
      p.mean = p.sum / static_cast<double>(t.finite);
      const unsigned __int128 s2 = static_cast<unsigned __int128>(t.sq_hi) << 64 | t.sq_lo;
      const u64 mag = s1 < 0 ? 0 - static_cast<u64>(s1) : static_cast<u64>(s1);
      const unsigned __int128 numerator = static_cast<unsigned __int128>(t.finite) * s2 -
                                          static_cast<unsigned __int128>(mag) * mag;  // >= 0, exact
      p.m2 = ldexp(u128_to_double(numerator) / static_cast<double>(t.finite), -48);
    }
    out[k] = p;
  }
}

// ---- decode.bitshuffle_lz4: HDF5 filter 32008 chunks (bitshuffle + LZ4) ------------------------------------
// Three launches per piece of chunks, after the host has read and checked each chunk's 12-byte header:
// a thread per chunk walks its blocks' size prefixes into a table; a thread per LZ4 block decodes it into
// scratch (the bit-shuffled bytes); a thread per element gathers its bits back (support/bitshuffle.h's
// layout). Every read and write is bounds-checked against the chunk and the block; a failure is recorded
// (the first one a chunk meets, in the CPU's order, is reported by the host) and nothing is unshuffled.
struct Lz4Block {
  uint64_t src;     // input offset of the LZ4 bytes
  uint64_t dst;     // byte offset of the decoded block in scratch (= of its elements in the output)
  uint64_t prefix;  // chunk byte of the block's size prefix (for messages)
  uint32_t csize, raw, index;  // compressed and decoded bytes; the block's index in its chunk
};
enum : uint32_t { kChunkOk = 0, kPrefixTruncated, kBlockOverruns, kTailMismatch, kLz4Corrupt, kLz4Short, kLz4OffsetZero };
struct ChunkFailure {
  uint32_t code, block;
  uint64_t offset, a, b;  // chunk byte; two numbers the message needs
};

__host__ __device__ inline uint64_t load_be(const unsigned char* p, unsigned bytes) {
  uint64_t v = 0;
  for (unsigned i = 0; i < bytes; ++i) v = v << 8 | p[i];
  return v;
}

// Chunk c's blocks: block k of n = min(block_elements, rest rounded down to 8) elements.
__global__ void bslz4_walk_kernel(const unsigned char* in, const uint64_t* offsets, uint64_t chunks, uint64_t chunk_elements,
                                  unsigned es, const uint64_t* block_elements, const uint64_t* block_base, Lz4Block* blocks,
                                  uint64_t* tail_src, ChunkFailure* failures, unsigned* failed) {
  for (uint64_t c = global_id(); c < chunks; c += grid_threads()) {
    const unsigned char* chunk = in + offsets[c];
    const uint64_t length = offsets[c + 1] - offsets[c], be = block_elements[c], whole = chunk_elements - chunk_elements % 8;
    uint64_t pos = 12, done = 0;
    uint32_t k = 0;
    ChunkFailure f{kChunkOk, 0, 0, 0, 0};
    for (; done < whole; ++k) {
      const uint64_t n = whole - done < be ? whole - done : be;
      if (length - pos < 4) { f = ChunkFailure{kPrefixTruncated, k, pos, length, 0}; break; }
      const uint64_t csize = load_be(chunk + pos, 4);
      pos += 4;
      if (csize > length - pos) { f = ChunkFailure{kBlockOverruns, k, pos - 4, csize, length - pos}; break; }
      blocks[block_base[c] + k] = Lz4Block{offsets[c] + pos, (c * chunk_elements + done) * es, pos - 4,
                                           static_cast<uint32_t>(csize), static_cast<uint32_t>(n * es), k};
      pos += csize, done += n;
    }
    const uint64_t tail_bytes = (chunk_elements - whole) * es;
    if (f.code == kChunkOk && length - pos != tail_bytes) f = ChunkFailure{kTailMismatch, k, pos, length - pos, tail_bytes};
    tail_src[c] = offsets[c] + pos;
    failures[c] = f;
    if (f.code != kChunkOk) atomicAdd(failed, 1u);
  }
}

// One LZ4 block (the format's rules as liblz4 1.9 applies them: a literal run that reaches within 12 bytes of
// the output's end or 8 of the input's must end the block exactly; a match must end at least 5 bytes before
// the output's end). Returns kChunkOk, kLz4Corrupt or kLz4OffsetZero with *at the compressed byte; *got the
// bytes written.
__device__ inline uint32_t lz4_decode_block(const unsigned char* in, uint64_t csize, unsigned char* out, uint64_t raw,
                                            uint64_t* got, uint64_t* at) {
  uint64_t ip = 0, op = 0;
  *got = 0;
  if (csize == 0) return *at = 0, kLz4Corrupt;
  for (;;) {
    if (ip >= csize) return *at = ip, kLz4Corrupt;
    const unsigned token = in[ip++];
    uint64_t lit = token >> 4;
    if (lit == 15) {
      if (ip + 15 >= csize) return *at = ip, kLz4Corrupt;
      unsigned s;
      do {
        s = in[ip++];
        lit += s;
        if (ip + 15 > csize) return *at = ip, kLz4Corrupt;
      } while (s == 255);
    }
    if (op + lit + 12 > raw || ip + lit + 8 > csize) {  // the last literals
      if (ip + lit != csize || op + lit > raw) return *at = ip, kLz4Corrupt;
      for (uint64_t i = 0; i < lit; ++i) out[op + i] = in[ip + i];
      *got = op + lit;
      return kChunkOk;
    }
    for (uint64_t i = 0; i < lit; ++i) out[op + i] = in[ip + i];
    ip += lit, op += lit;
    const uint64_t offset = in[ip] | static_cast<uint64_t>(in[ip + 1]) << 8;
    if (offset == 0) return *at = ip, kLz4OffsetZero;
    if (offset > op) return *at = ip, kLz4Corrupt;
    ip += 2;
    uint64_t length = token & 15u;
    if (length == 15) {
      unsigned s;
      do {
        s = in[ip++];
        length += s;
        if (ip + 4 > csize) return *at = ip, kLz4Corrupt;
      } while (s == 255);
    }
    length += 4;
    if (op + length + 5 > raw) return *at = ip, kLz4Corrupt;
    for (uint64_t i = 0; i < length; ++i) out[op + i] = out[op - offset + i];  // overlapping copies repeat
    op += length;
    *got = op;
  }
}

__global__ void bslz4_blocks_kernel(const unsigned char* in, const Lz4Block* blocks, uint64_t count, unsigned char* scratch,
                                    ChunkFailure* failures, unsigned* failed) {
  for (uint64_t b = global_id(); b < count; b += grid_threads()) {
    const Lz4Block& k = blocks[b];
    if (k.raw == 0) {  // never written: its chunk's walk failed before this block
      failures[b] = ChunkFailure{kChunkOk, 0, 0, 0, 0};
      continue;
    }
    uint64_t got = 0, at = 0;
    uint32_t code = lz4_decode_block(in + k.src, k.csize, scratch + k.dst, k.raw, &got, &at);
    if (code == kChunkOk && got != k.raw) code = kLz4Short, at = got;
    failures[b] = ChunkFailure{code, k.index, k.prefix, at, code == kLz4Short ? uint64_t{k.raw} : uint64_t{k.csize}};
    if (code != kChunkOk) atomicAdd(failed, 1u);
  }
}

__global__ void bslz4_unshuffle_kernel(const unsigned char* in, const unsigned char* scratch, uint64_t n, uint64_t chunk_elements,
                                       unsigned es, const uint64_t* block_elements, const uint64_t* block_base,
                                       const Lz4Block* blocks, const uint64_t* tail_src, unsigned char* out) {
  const uint64_t whole = chunk_elements - chunk_elements % 8;
  for (uint64_t e = global_id(); e < n; e += grid_threads()) {
    const uint64_t c = e / chunk_elements, j = e % chunk_elements;
    unsigned char* dst = out + e * es;
    if (j >= whole) {
      for (unsigned b = 0; b < es; ++b) dst[b] = in[tail_src[c] + (j - whole) * es + b];
      continue;
    }
    const uint64_t k = j / block_elements[c], m = j - k * block_elements[c];
    const Lz4Block& blk = blocks[block_base[c] + k];
    const uint64_t row = blk.raw / es / 8;  // bytes per bit plane
    const unsigned char* planes = scratch + blk.dst;
    for (unsigned b = 0; b < es; ++b) {
      unsigned v = 0;
      for (unsigned i = 0; i < 8; ++i) v |= ((planes[(8 * b + i) * row + m / 8] >> (m % 8)) & 1u) << i;
      dst[b] = static_cast<unsigned char>(v);
    }
  }
}

// The masking extension (op_contracts.h) over n decoded elements of width es: all-ones elements become 0 and
// are counted; then the listed element indices become 0 in every chunk (one thread per (chunk, index)).
__global__ void bslz4_zero_all_ones_kernel(unsigned char* data, uint64_t n, unsigned es, u64* zeroed) {
  u64 count = 0;
  for (uint64_t e = global_id(); e < n; e += grid_threads()) {
    unsigned char* px = data + e * es;
    bool ones = true;
    for (unsigned b = 0; b < es; ++b) ones = ones && px[b] == 0xFF;
    if (!ones) continue;
    for (unsigned b = 0; b < es; ++b) px[b] = 0;
    ++count;
  }
  if (count) atomicAdd(zeroed, count);
}

__global__ void bslz4_zero_listed_kernel(unsigned char* data, uint64_t chunks, uint64_t chunk_elements, unsigned es,
                                         const uint32_t* listed, uint64_t listed_count) {
  for (uint64_t t = global_id(); t < chunks * listed_count; t += grid_threads()) {
    unsigned char* px = data + ((t / listed_count) * chunk_elements + listed[t % listed_count]) * es;
    for (unsigned b = 0; b < es; ++b) px[b] = 0;
  }
}

// ---- stem.ssb_overlap: the per-pixel overlap correction and the reduction (the FFT between is gpu_fft.inl) ----
// The CPU reference's arithmetic (backends/cpu/ssb_overlap_kernel.cpp) in float64, planes in complex64;
// pixels are summed in order (deterministic; bounded against the CPU, whose groups sum in another order).
struct SsbArgs {
  uint32_t variant, chi_terms_count;
  uint64_t rows, cols, stride;
  double kmax2;
  const double *pixel_k, *dc, *nu, *e_chi, *row_factor, *col_factor;
  const tm_ssb_chi_term_v1* chi_terms;
};
struct Cplx {
  double re, im;
};
__device__ inline Cplx cmul(Cplx a, Cplx b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
__device__ inline Cplx conj_of(Cplx a) { return {a.re, -a.im}; }
__device__ inline Cplx polar_unit(double angle) { return {cos(angle), sin(angle)}; }

__device__ inline double ssb_chi(const SsbArgs& a, double r, double c) {
  const double mag2 = r * r + c * c;
  if (mag2 == 0) return 0;
  const double phi = atan2(r, c), mag = sqrt(mag2);
  double chi = 0;
  for (uint32_t t = 0; t < a.chi_terms_count; ++t) {
    const tm_ssb_chi_term_v1& term = a.chi_terms[t];
    const double radial = term.power == 2 ? mag2 : pow(mag, term.power);
    chi += term.coefficient * radial * (term.fold == 0 ? 1.0 : cos(term.fold * (phi - term.angle)));
  }
  return chi;
}

// Thread per (pixel of the batch, scan frequency): C_b(q) into planes[local pixel][q] (complex64).
__global__ void ssb_build_kernel(const float* spectra, SsbArgs a, uint64_t first, uint64_t count, float* planes) {
  const uint64_t R = a.rows, C = a.cols, N = R * C, half_cols = C / 2 + 1;
  for (uint64_t t = global_id(); t < count * N; t += grid_threads()) {
    const uint64_t local = t / N, q = t % N, b = first + local, i = q / C, j = q % C;
    const float* gh = spectra + 2 * local * a.stride;
    const double kr = a.pixel_k[2 * b], kc = a.pixel_k[2 * b + 1];
    const bool inside = kr * kr + kc * kc <= a.kmax2;
    Cplx cv{0, 0};
    if (inside && q != 0) {
      const double mr = kr - a.nu[2 * q], mc = kc - a.nu[2 * q + 1], pr = kr + a.nu[2 * q], pc = kc + a.nu[2 * q + 1];
      const bool minus = mr * mr + mc * mc <= a.kmax2, plus = pr * pr + pc * pc <= a.kmax2;
      if (minus || plus) {
        Cplx g;
        if (j < half_cols) g = {gh[2 * (i * half_cols + j)], gh[2 * (i * half_cols + j) + 1]};
        else {  // G(−ν) = conj G(ν)
          const uint64_t at = ((R - i) % R) * half_cols + (C - j);
          g = {gh[2 * at], -gh[2 * at + 1]};
        }
        if (a.variant == TM_SSB_QUADRATIC) {
          const Cplx e{a.e_chi[2 * q], a.e_chi[2 * q + 1]};
          Cplx w;
          if (minus && plus) {
            const double two_sin = 2 * e.im, mag = two_sin < 0 ? -two_sin : two_sin;
            w = {0.0, two_sin / (mag > 1e-8 ? mag : 1e-8)};
          } else {
            w = minus ? e : Cplx{-e.re, e.im};
          }
          const Cplx rf{a.row_factor[2 * (b * R + i)], a.row_factor[2 * (b * R + i) + 1]};
          const Cplx cf{a.col_factor[2 * (b * C + j)], a.col_factor[2 * (b * C + j) + 1]};
          cv = cmul(cmul(g, cmul(rf, cf)), w);
        } else {  // Γ = P(k − ν)·P*(k) − P*(k + ν)·P(k), P = A·e^{−iχ}
          const Cplx p0 = polar_unit(-ssb_chi(a, kr, kc));
          const Cplx pm = minus ? polar_unit(-ssb_chi(a, mr, mc)) : Cplx{0, 0};
          const Cplx pp = plus ? polar_unit(-ssb_chi(a, pr, pc)) : Cplx{0, 0};
          const Cplx x = cmul(pm, conj_of(p0)), y = cmul(conj_of(pp), p0);
          const Cplx gamma{x.re - y.re, x.im - y.im};
          const double mag = sqrt(gamma.re * gamma.re + gamma.im * gamma.im), d = mag > 1e-8 ? mag : 1e-8;
          const Cplx num = cmul(g, conj_of(gamma));
          cv = {num.re / d, num.im / d};
        }
      }
    }
    if (q == 0) cv = {a.dc[b], 0.0};  // the DC term (Γ := 1)
    planes[2 * t] = static_cast<float>(cv.re);
    planes[2 * t + 1] = static_cast<float>(cv.im);
  }
}

// Thread per scan position: adds Re, Im, arg and arg² of O_b = IFFT2(C_b) / N over the batch's pixels in order.
__global__ void ssb_reduce_kernel(const float* planes, uint64_t count, uint64_t n, double* sums) {
  const double inv_n = 1.0 / static_cast<double>(n);
  for (uint64_t q = global_id(); q < n; q += grid_threads()) {
    double s0 = sums[4 * q], s1 = sums[4 * q + 1], s2 = sums[4 * q + 2], s3 = sums[4 * q + 3];
    for (uint64_t b = 0; b < count; ++b) {
      const double re = planes[2 * (b * n + q)] * inv_n, im = planes[2 * (b * n + q) + 1] * inv_n;
      const double a = atan2(im, re);
      s0 += re, s1 += im, s2 += a, s3 += a * a;
    }
    sums[4 * q] = s0, sums[4 * q + 1] = s1, sums[4 * q + 2] = s2, sums[4 * q + 3] = s3;
  }
}

// ---- dequantize.ggml: the 256-element K-quant super-blocks -------------------------------------------------
// The order of float operations of ggml's dequantize_row_q*_k (backends/cpu/dequant/ggml_kquants.cpp): the
// sub-block products d * scale and dmin * min first, then (d * scale) * q - (dmin * min).
enum : unsigned { kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15 };
__host__ __device__ inline unsigned kquant_block_bytes(unsigned type) {
  switch (type) {
    case kQ2_K: return 84;
    case kQ3_K: return 110;
    case kQ4_K: return 144;
    case kQ5_K: return 176;
    case kQ6_K: return 210;
    case kQ8_K: return 292;
    default: return 0;
  }
}
// Q4_K/Q5_K: the 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
__device__ inline void k4_scale_min(const unsigned char* packed, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = packed[j] & 63, *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4);
    *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}
// Q3_K: signed 6-bit scale i (-32 .. 31) from the 12 packed bytes.
__device__ inline int q3k_scale(const unsigned char* packed, int i) {
  const int low = i < 8 ? (packed[i] & 0x0F) : (packed[i - 8] >> 4);
  const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// Thread per output element.
__global__ void dequantize_kquant_kernel(const unsigned char* blocks, uint64_t n, unsigned type, float* out) {
  const unsigned bytes = kquant_block_bytes(type);
  for (uint64_t i = global_id(); i < n; i += grid_threads()) {
    const unsigned char* b = blocks + (i / 256) * bytes;
    const int j = static_cast<int>(i % 256);
    switch (type) {
      case kQ2_K: {
        const int s = j / 16, l = j % 16;
        const float dl = load_half(b + 80) * static_cast<float>(b[s] & 0x0F);
        const float ml = load_half(b + 82) * static_cast<float>(b[s] >> 4);
        const unsigned char* q = b + 16 + 32 * (s / 8) + 16 * (s % 2);
        const float prod = dl * static_cast<float>((q[l] >> (2 * ((s % 8) / 2))) & 3);
        out[i] = prod - ml;
        break;
      }
      case kQ3_K: {
        const int s = j / 16, l = j % 16, half = s / 8, pass = (s % 8) / 2, at = 16 * (s % 2) + l;
        const float dl = load_half(b + 108) * static_cast<float>(q3k_scale(b + 96, s));
        const int low = (b[32 + 32 * half + at] >> (2 * pass)) & 3;
        const int minus = (((b[at] >> (4 * half + pass)) & 1) ^ 1) << 2;
        out[i] = dl * static_cast<float>(low - minus);
        break;
      }
      case kQ4_K:
      case kQ5_K: {
        const int c = j / 64, r = j % 64, l = r % 32, sub = 2 * c + (r >= 32);
        int scale, min;
        k4_scale_min(b + 4, sub, &scale, &min);
        const float d1 = load_half(b) * static_cast<float>(scale), m1 = load_half(b + 2) * static_cast<float>(min);
        int q;
        if (type == kQ4_K) {
          const unsigned char byte = b[16 + 32 * c + l];
          q = r < 32 ? byte & 0x0F : byte >> 4;
        } else {
          const unsigned char byte = b[48 + 32 * c + l];
          q = (r < 32 ? byte & 0x0F : byte >> 4) | (((b[16 + l] >> sub) & 1) << 4);
        }
        const float prod = d1 * static_cast<float>(q);
        out[i] = prod - m1;
        break;
      }
      case kQ6_K: {
        const int h = j / 128, r = j % 128, k = r / 32, l = r % 32;
        const int lo4 = (b[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0x0F;
        const int hi2 = (b[128 + 32 * h + l] >> (2 * k)) & 3;
        const float scale = load_half(b + 208) * static_cast<float>(static_cast<int8_t>(b[192 + 8 * h + 2 * k + l / 16]));
        out[i] = scale * static_cast<float>((lo4 | (hi2 << 4)) - 32);
        break;
      }
      default: {  // Q8_K: float32 d, int8 codes
        float d;
        const uint32_t bits = load_u32_le(b);
        memcpy(&d, &bits, sizeof d);
        out[i] = d * static_cast<float>(static_cast<int8_t>(b[4 + j]));
        break;
      }
    }
  }
}

}  // namespace tmorph::gpu
