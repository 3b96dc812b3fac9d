/* Operation contracts: the parameters and outputs of every tm_op, shared by core and all backends.
 *
 * These are the definitions the parity tests hold every backend to. Units and conventions:
 *  - "finite" excludes NaN and ±Inf. Integer and bool elements are always finite.
 *  - zero counts +0 and -0 (integers: == 0; bool: false).
 *  - Floating inputs are widened exactly to double before any arithmetic.
 */
#ifndef TENSORMORPH_OP_CONTRACTS_H
#define TENSORMORPH_OP_CONTRACTS_H

#include <stdint.h>
#include <string.h>

#include "tensormorph/plugin_abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- TM_OP_STATS_MOMENTS ---------------------------------------------------------------------------
 * Input: element_count elements that start at a canonical block boundary of the tensor.
 * Output: one tm_moments_partial_v1 per block of TM_STATS_BLOCK_ELEMENTS consecutive elements
 *   (the last block may be short); output_size = ceil(element_count / block) * sizeof(partial).
 * Params: none.
 *
 * Canonical blocks are what make results independent of thread count and I/O chunking: a block's
 * partial depends only on its elements, and core merges block partials in one fixed tree
 * (see src/ops/moments_reducer.h).
 *
 * The CPU reference computes a block as follows (other backends may differ within their declared
 * precision class): element i of the block is added to accumulator lane (i mod 16); the 16 lane
 * sums are reduced pairwise (0+1, 2+3, ... then again) in double; mean = sum / finite_count.
 * m2: for floats narrower than f64 (whose squares are exact in double) the squares are summed in the
 * same lanes in the same pass, and m2 = sumsq - sum * mean whenever sum * mean <= sumsq / 2 (at most
 * one bit lost to cancellation). Otherwise, and always for f64 and integers, m2 is a second pass over
 * the block: the sum over finite x of (x - mean)^2, in the same 16-lane order.
 * Integers: sum is the exact sum; mean = double(sum) / double(count) (one rounding) when |sum| < 2^53,
 * which holds for every dtype up to 32 bits, else the long double quotient rounded to double.
 */
#define TM_STATS_BLOCK_ELEMENTS 65536u
#define TM_STATS_LANES 16u

typedef struct tm_moments_partial_v1 {
  uint64_t count;        /* elements in the block, finite or not                                   */
  uint64_t finite_count; /* elements that are neither NaN nor ±Inf                                 */
  uint64_t nan_count;
  uint64_t inf_count;
  uint64_t zero_count;   /* ±0                                                                     */
  double min;            /* over finite values; +Inf when finite_count == 0                        */
  double max;            /* over finite values; -Inf when finite_count == 0                        */
  double abs_max;        /* over finite values; 0 when finite_count == 0                           */
  double sum;            /* sum of finite values ...                                               */
  double sum_err;        /* ... plus this compensation term: exact sum ~= sum + sum_err            */
  double mean;           /* of finite values; 0 when finite_count == 0                             */
  double m2;             /* sum of (x - mean)^2 over finite values                                 */
  /* Integer dtypes only (zero otherwise): exact extremes and the exact 128-bit two's complement sum. */
  int64_t int_min;
  int64_t int_max;
  uint64_t uint_min;
  uint64_t uint_max;
  uint64_t int_sum_lo;
  int64_t int_sum_hi;
} tm_moments_partial_v1;

/* ---- TM_OP_STATS_HISTOGRAM --------------------------------------------------------------------------
 * Params: tm_histogram_params_v1. Output: uint64_t counts[bins + 2]: counts[0..bins-1] are the bins,
 * counts[bins] the finite values below edges[0], counts[bins + 1] those above edges[bins].
 * Bin i holds edges[i] <= x < edges[i+1]; the last bin also holds x == edges[bins] (numpy semantics).
 * Non-finite values are not counted (they are in the moments' nan/inf counts). Exact on every backend.
 * Counts are ADDED to the output (the caller zeroes it once), so a tensor can be binned in pieces.
 */
typedef struct tm_histogram_params_v1 {
  uint32_t bins;         /* 1 .. 65536                                                             */
  const double* edges;   /* bins + 1 strictly increasing finite values                             */
} tm_histogram_params_v1;

/* ---- TM_OP_STATS_BITPATTERN_HISTOGRAM ----------------------------------------------------------------
 * For 8- and 16-bit dtypes: output uint64_t counts[256] or counts[65536], counts[p] = number of elements
 * whose raw little-endian bit pattern is p. No params. Exact on every backend.
 * Counts are ADDED to the output (the caller zeroes it once), so a tensor can be counted in pieces.
 */

/* ---- TM_OP_STATS_QUANTILES ---------------------------------------------------------------------------
 * Params: tm_quantiles_params_v1. Output: tm_quantile_value_v1[count].
 * Definition (exact kernels): numpy.quantile(finite_values_as_float64, p, method="linear"):
 *   h = (n - 1) * p, a = x[floor h], b = x[floor h + 1], t = h - floor h,
 *   q = (t >= 0.5) ? b - (b - a) * (1 - t) : a + (b - a) * t.
 * An approximate kernel states in lo/hi an interval guaranteed (sketch) or expected (sampling) to hold
 * the exact value; exact kernels set lo = hi = value.
 */
typedef struct tm_quantiles_params_v1 {
  uint32_t count;
  const double* probabilities; /* each in [0, 1]                                                   */
  uint64_t memory_budget_bytes;/* what the kernel may hold (sampling sizes its sample from it)      */
} tm_quantiles_params_v1;

typedef struct tm_quantile_value_v1 {
  double value;
  double lo;
  double hi;
  uint64_t sample_size;        /* values the answer was computed from (n for exact kernels)         */
} tm_quantile_value_v1;

/* ---- TM_OP_DEQUANTIZE_GGML ------------------------------------------------------------------------
 * Decodes ggml block formats (the quantized tensor types of GGUF) to float32.
 * Params: tm_dequantize_ggml_params_v1. The call's dtype is TM_DTYPE_F32 (the output type); its
 * element_count is a multiple of the format's block size and its input holds element_count / block
 * size whole blocks. Output: float[element_count], row-major as ggml lays the blocks out.
 * Exact: every value bit-identical to ggml's reference dequantize_row_* (same float32 operations in the
 * same order). For this op a kernel's dtype_mask holds bit (1 << ggml type id) for each format it
 * decodes (every ggml block type id is below 64).
 */
typedef struct tm_dequantize_ggml_params_v1 {
  uint32_t ggml_type;    /* ggml type id: 2 = Q4_0, 8 = Q8_0, 12 = Q4_K, 39 = MXFP4, ...           */
  uint32_t reserved;     /* 0                                                                      */
} tm_dequantize_ggml_params_v1;

/* ---- TM_OP_DIFF_MOMENTS -----------------------------------------------------------------------------
 * How far a test array b is from a reference array a (e.g. a quantized tensor from its f16 source).
 * dtype TM_DTYPE_F32; input = a (element_count floats); params: tm_diff_params_v1 with b (as many).
 * Output: tm_diff_partial_v1[ceil(element_count / TM_STATS_BLOCK_ELEMENTS)], one per canonical block of
 * 65,536 elements, each summed in float64 in element order; pairs where a or b is not finite are only
 * counted. The caller merges the blocks in order, so the result does not depend on threads. Exact in
 * the sense of the contract: every backend returns the same float64 sums.
 */
typedef struct tm_diff_params_v1 {
  const float* b;
} tm_diff_params_v1;

typedef struct tm_diff_partial_v1 {
  uint64_t count;          /* pairs in the block                                                     */
  uint64_t nonfinite;      /* pairs where a or b is NaN or infinite                                  */
  double sum_sq_diff;      /* sum of (b - a)^2 over finite pairs                                     */
  double max_abs_diff;     /* max |b - a| over finite pairs (0 when none)                            */
  double sum_sq_a;         /* sum of a^2                                                             */
  double sum_sq_b;         /* sum of b^2                                                             */
  double sum_ab;           /* sum of a * b                                                           */
} tm_diff_partial_v1;

/* ---- TM_OP_GGML_BLOCK_STATS -------------------------------------------------------------------------
 * What quantization did, read from the blocks without dequantizing. Input and element_count as for
 * TM_OP_DEQUANTIZE_GGML (whole blocks; dtype TM_DTYPE_F32 by convention; dtype_mask = ggml type ids).
 * Params: tm_ggml_block_stats_params_v1: scales[i] / mins[i] receive block i's (super-block) scale and
 * min as float32 when the arrays are non-null and the format has them (MXFP4: the OCP scale
 * 2^(e - 127)). Output: tm_ggml_block_stats_v1; code_counts and saturated are ADDED (the caller zeroes
 * them once), so a tensor can be read in pieces. code_counts[c] counts stored code c (int8 codes at
 * c = q + 128); saturated counts codes at either end of the format's code range.
 */
typedef struct tm_ggml_block_stats_params_v1 {
  uint32_t ggml_type;
  uint32_t reserved;     /* 0                                                                      */
  float* scales;         /* element_count / block size entries, or NULL                            */
  float* mins;           /* as many, or NULL                                                       */
} tm_ggml_block_stats_params_v1;

typedef struct tm_ggml_block_stats_v1 {
  uint32_t code_bits;    /* bits per counted code; 0 when the format's codes are not counted       */
  uint32_t has_scale;    /* 1 when scales were written                                             */
  uint32_t has_min;      /* 1 when mins were written                                               */
  uint32_t reserved;
  uint64_t code_counts[256];
  uint64_t saturated;
} tm_ggml_block_stats_v1;

/* ---- TM_OP_DEQUANTIZE_PACKED ------------------------------------------------------------------------
 * Decodes the safetensors-packed quantization schemes (docs/formats.md) to float32: one logical matrix
 * of rows x cols values built from several stored parts. Leading dimensions of the logical tensor are
 * folded into rows. The call's dtype is TM_DTYPE_F32 (the output type); a kernel's dtype_mask holds bit
 * (1 << scheme) for each TM_PACKED_* scheme it decodes. Params: tm_dequantize_packed_params_v1.
 * Input: the scheme's code part, whole (the call selects rows with row_first). element_count is a
 * whole number of rows; output: float[element_count], logical rows row_first.. in row-major order.
 * The caller has validated every part's size and every index a part holds (g_idx < groups), and
 * widened every scale-like part to float32 exactly. Exact: each value is one float32 product (plus the
 * documented zero-point subtraction in integers), so every backend returns the same bits.
 *   FP8:   v = f32(code) * scales[(r / block_rows) * ceil(cols / block_cols) + c / block_cols];
 *          input: rows x cols bytes of code_dtype (TM_DTYPE_F8_E4M3FN or TM_DTYPE_F8_E5M2).
 *   MXFP4: input: rows x cols/2 bytes, element 2j in the low nibble of byte j; exponents: rows x
 *          cols/32 E8M0 bytes; v = E2M1(code) * 2^(e - 127) (e = 255: NaN). cols % 32 == 0.
 *   BNB4:  input: ceil(rows*cols / 2) bytes over the row-major flattening, element 2j in the HIGH
 *          nibble of byte j; v = code_values[code] * scales[(r*cols + c) / block_cols].
 *   GPTQ:  logical [out = rows, in = cols]; input: int32 qweight [cols*bits/32, rows]: column o of
 *          qweight is output o's bit stream, input i at stream bits i*bits .. i*bits + bits - 1 (lowest
 *          first; word k of the stream is word (k, o)); for 2, 4, 8 bits word (k, o) holds inputs
 *          k*(32/bits) + j at bits j*bits; 3-bit codes cross word boundaries (32 inputs per 3 words, as
 *          AutoGPTQ packs them). zeros: int32 [groups, rows*bits/32], row g the bit stream of outputs.
 *          tm_gptq_field reads either. scales: [groups, rows]; group_index[c] < groups.
 *          v = scales[g, r] * f32(q - (z + zero_offset)), g = group_index[c]. cols and rows % 32 == 0
 *          for 3 bits, % (32/bits) otherwise.
 *   AWQ:   logical [out = rows, in = cols]; input: int32 qweight [cols, rows/8]: nibble j of word (i, w)
 *          holds output w*8 + {0,2,4,6,1,3,5,7}[j]; zeros: int32 [groups, rows/8], same packing;
 *          scales: [groups, rows]; v = scales[c / block_cols, r] * f32(q - z). bits = 4.
 */
typedef enum tm_packed_scheme {
  TM_PACKED_FP8 = 0,
  TM_PACKED_MXFP4 = 1,
  TM_PACKED_BNB4 = 2,
  TM_PACKED_GPTQ = 3,
  TM_PACKED_AWQ = 4,
  TM_PACKED_COUNT_ = 5
} tm_packed_scheme;

/* GPTQ code `index` of a bit stream of 32-bit words lying `stride` words apart (qweight column o: words + o,
 * stride rows; qzeros row g: words + g*rows*bits/32, stride 1): stream bits index*bits .. + bits - 1. */
static inline uint32_t tm_gptq_field(const int32_t* words, uint64_t stride, uint64_t index, uint32_t bits) {
  /* Parts may lie at any byte offset in the file: words are read with memcpy, never dereferenced. */
  const uint64_t bit = index * bits, w = bit / 32;
  const uint32_t shift = (uint32_t)(bit % 32);
  uint32_t lo = 0, hi = 0;
  const unsigned char* base = (const unsigned char*)words;
  memcpy(&lo, base + 4 * (w * stride), 4);
  if (shift + bits > 32) memcpy(&hi, base + 4 * ((w + 1) * stride), 4);
  return (uint32_t)((((uint64_t)hi << 32) | lo) >> shift) & ((1u << bits) - 1u);
}

typedef struct tm_dequantize_packed_params_v1 {
  uint32_t scheme;            /* tm_packed_scheme                                                     */
  uint32_t bits;              /* GPTQ: 2, 3, 4 or 8; AWQ: 4; others 0                                */
  uint32_t code_dtype;        /* FP8: TM_DTYPE_F8_E4M3FN or TM_DTYPE_F8_E5M2; others 0                */
  int32_t zero_offset;        /* GPTQ: added to every stored zero (v1 checkpoints: 1; v2: 0)         */
  uint64_t rows, cols;        /* the logical matrix                                                  */
  uint64_t row_first;         /* first row this call writes                                          */
  uint64_t block_rows;        /* FP8: rows per scale block                                           */
  uint64_t block_cols;        /* FP8: columns per scale block; BNB4: elements per absmax; AWQ: group  */
  uint64_t groups;            /* GPTQ, AWQ: rows of scales and zeros                                 */
  const float* scales;        /* FP8 scale grid; BNB4 absmax; GPTQ/AWQ [groups, rows]; else NULL     */
  const uint8_t* exponents;   /* MXFP4 E8M0 scales; else NULL                                        */
  const float* code_values;   /* BNB4: the 16-entry quant_map; else NULL                             */
  const int32_t* zeros;       /* GPTQ, AWQ: packed zero points; else NULL                            */
  const int32_t* group_index; /* GPTQ: cols entries (g_idx); else NULL                               */
} tm_dequantize_packed_params_v1;

/* ---- TM_OP_QUANT_MOMENTS -----------------------------------------------------------------------------
 * The moments of a ggml block format's dequantized values, computed from its codes and scales without
 * decoding them, for formats whose every value is the exact float32 product of an fp16 scale and a small
 * integer code (Q4_0: d * (q - 8); Q8_0: d * q). Input and element_count as TM_OP_DEQUANTIZE_GGML, the
 * input starting at a canonical block boundary of the tensor; dtype TM_DTYPE_F32 by convention;
 * dtype_mask = ggml type ids; params: tm_dequantize_ggml_params_v1. Output: one tm_moments_partial_v1
 * per canonical block of TM_STATS_BLOCK_ELEMENTS values (as TM_OP_STATS_MOMENTS).
 * Counts, min, max and abs_max are those of the dequantized values. sum is the exact sum of the block's
 * finite values rounded once to double (integer arithmetic on code sums and scale mantissas), sum_err
 * the exact remainder; mean = sum / finite_count; m2 = (n * sum(x^2) - sum(x)^2) / n from exact
 * integers, rounded twice. These are at least as accurate as TM_OP_STATS_MOMENTS over the decoded
 * values (whose lane sums round), and every backend returns the same bits.
 */

/* ---- TM_OP_STEM_FRAME_SUMS ---------------------------------------------------------------------------
 * Integer sums over each 4D-STEM detector frame, several products in one pass. Input: element_count =
 * frames × pixels_per_frame values of dtype U8, U16 or U32, frame after frame, each frame row-major with
 * `cols` pixels per row (pixel i lies at row i / cols, column i % cols). Params:
 * tm_stem_frame_sums_params_v1. Pixel lists: list j holds the pixel indices
 * list_pixels[list_offsets[j] .. list_offsets[j + 1]), each < pixels_per_frame, strictly increasing.
 * Output: per frame f, TM_STEM_FRAME_SUMS_FIXED + list_count uint64 values at
 * output[f * (TM_STEM_FRAME_SUMS_FIXED + list_count)]:
 *   [0] Σ I over every pixel (the frame total)
 *   [1] Σ I over the centre-of-mass pixels: list com_list, or every pixel when com_list is
 *       TM_STEM_ALL_PIXELS
 *   [2] Σ row · I over the same pixels
 *   [3] Σ col · I over the same pixels
 *   [4 + j] Σ I over list j
 * With flags & TM_STEM_LISTS_ONLY, [0..3] are not computed (written as 0) and only the lists are summed, so a
 * small detector reads only the rows it covers.
 * All sums are exact in uint64: the caller guarantees pixels_per_frame × max(rows, cols) × max value < 2^64.
 * Every backend returns the same integers.
 * Float frames (dtype F32 or F64: gain-corrected detectors such as EMPAD, binned float frames): the output
 * values are float64 (same layout, 8 bytes each). Each product I, row·I and col·I is formed in float64
 * (exact for float32 values times an index below 2^16; rounded once for float64 values) and added to one float64 accumulator starting at +0.0,
 * pixel by pixel in increasing pixel index (row-major) order, one frame at a time; so every sum is the
 * sequential left-to-right float64 sum (numpy: np.cumsum(values.astype(np.float64))[-1]) and every run, thread
 * count and batch size gives the same bits. NaN and Inf propagate as IEEE addition says.
 */
#define TM_STEM_LISTS_ONLY 1u
#define TM_STEM_FRAME_SUMS_FIXED 4u
#define TM_STEM_ALL_PIXELS 0xFFFFFFFFu
typedef struct tm_stem_frame_sums_params_v1 {
  uint64_t pixels_per_frame;
  uint32_t cols;
  uint32_t list_count;
  const uint64_t* list_offsets;  /* list_count + 1 entries, list_offsets[0] = 0                  */
  const uint32_t* list_pixels;
  uint32_t com_list;             /* a list index, or TM_STEM_ALL_PIXELS                          */
  uint32_t flags;                /* 0 or TM_STEM_LISTS_ONLY                                      */
} tm_stem_frame_sums_params_v1;

/* ---- TM_OP_STEM_COMPACT_SUMS -------------------------------------------------------------------------
 * What TM_OP_STEM_FRAME_SUMS computes, over frames held in the compact resident form (the resident copy of
 * stem/resident/compact_frames.h): per frame only its non-zero pixels, each as (key, running total), so a copy
 * kept in device memory answers every masked sum without being moved again.
 * Input: dtype U8, element_count bytes of a compact image made of pages. Page i starts at byte
 * i * TM_STEM_COMPACT_PAGE_BYTES (so a page never straddles a 4 MiB boundary of the image) and holds the
 * consecutive positions [page_first[i], page_first[i + 1]); its bytes, as little-endian uint32 words from the
 * page's start:
 *   word 0: n, the page's positions; word 1: e, the page's entries;
 *   words 2 .. 2 + n: o[0..n], position j of the page holding entries [o[j], o[j + 1]) (o[0] = 0, o[n] = e);
 *   then e keys: uint16 (key_bytes 2; padded to a whole word) or uint32 (key_bytes 4), each < pixels_per_frame;
 *   then e running totals (uint32): entry k's value is total[k] - total[k - 1], and total[o[j]] itself for a
 *   position's first entry (a position's running totals never wrap: its total is below 2^32).
 *   All of a page lies within its TM_STEM_COMPACT_PAGE_BYTES.
 * Params: tm_stem_compact_sums_params_v1. position_count positions are computed (any order, each <
 * page_first[page_count]); lists are given per key: bit j of key_lists[k] is set when key k belongs to list j
 * (list_count <= 64); the pixel of key k is pixel_of_key[k] (each < pixels_per_frame), or k itself when
 * pixel_of_key is NULL (row pixel / cols, column pixel % cols). list_ranges (NULL, or 2 * list_count uint32): when
 * list_ranges[2j] < list_ranges[2j + 1], list j is instead every key in [list_ranges[2j], list_ranges[2j + 1]) (its
 * bits in key_lists are not read), summed from two running totals found by binary search over the position's keys,
 * which are strictly increasing (a centred annulus of a radially ordered copy); the centre-of-mass list is always read
 * from key_lists.
 * Output: per requested position, in `positions` order, TM_STEM_FRAME_SUMS_FIXED + list_count uint64 values laid
 * out as stem.frame_sums's: [0] total, [1] the centre-of-mass weight (list com_list, or the total when com_list is
 * TM_STEM_ALL_PIXELS), [2] sum of row * value and [3] sum of column * value over the same keys, [4 + j] sum over
 * list j; with flags & TM_STEM_LISTS_ONLY, [0..3] are written as 0. Exact uint64 integer sums (the caller
 * guarantees they fit): every backend returns the same integers as stem.frame_sums over the dense frames.
 */
#define TM_STEM_COMPACT_PAGE_BYTES (4u << 20)
#define TM_STEM_COMPACT_MAX_LISTS 64u
typedef struct tm_stem_compact_sums_params_v1 {
  uint64_t pixels_per_frame;
  uint32_t cols;
  uint32_t key_bytes;            /* 2 or 4                                                        */
  uint32_t page_count;
  uint32_t list_count;           /* at most TM_STEM_COMPACT_MAX_LISTS                             */
  const uint64_t* page_first;    /* page_count + 1 entries, non-decreasing, page_first[0] = 0      */
  const uint32_t* positions;
  uint64_t position_count;
  const uint64_t* key_lists;     /* pixels_per_frame entries (may be NULL when list_count is 0)   */
  const uint32_t* pixel_of_key;  /* pixels_per_frame entries, or NULL                             */
  uint32_t com_list;             /* a list index, or TM_STEM_ALL_PIXELS                          */
  uint32_t flags;                /* 0 or TM_STEM_LISTS_ONLY                                      */
  const uint32_t* list_ranges;   /* 2 * list_count entries, or NULL: lists that are key ranges   */
} tm_stem_compact_sums_params_v1;

/* ---- TM_OP_STEM_PATTERN_REDUCE -----------------------------------------------------------------------
 * Per-pixel reductions over frames. Input as TM_OP_STEM_FRAME_SUMS; params: tm_stem_pattern_params_v1.
 * Output: pixels_per_frame uint64 sums followed by pixels_per_frame uint32 maxima. Both are ACCUMULATED
 * (sum += , max = max(max, ·)): the caller zeroes them once and may call again on further frames. Exact.
 * Float frames (F32, F64): pixels_per_frame float64 sums followed by pixels_per_frame float64 maxima (16
 * bytes per pixel). Each pixel's sum adds the frames' values in float64 in frame order (sequential, as
 * np.cumsum(frames.astype(np.float64), axis=0)[-1], across calls in call order); its maximum is
 * m = x > m ? x : m with x widened to float64 (NaN never replaces m: np.fmax.reduce, except that a pixel whose
 * values are all NaN keeps -Inf). The caller sets the sums to +0.0 and the maxima to -Inf once.
 */
typedef struct tm_stem_pattern_params_v1 {
  uint64_t pixels_per_frame;
} tm_stem_pattern_params_v1;

/* ---- TM_OP_DISPLAY_COLORIZE --------------------------------------------------------------------------
 * Display colours and the display histogram in one pass (the contract of src/display/display_kernels.h,
 * made exact for every backend). Input: element_count values of dtype F64. Params:
 * tm_display_colorize_params_v1. The host turns (transform, limits, log floor) into 255 thresholds in
 * DATA space (src/display/thresholds.h): thresholds[k - 1] is the smallest float64 key whose CPU
 * reference colour index is >= k, -Inf when every finite key's is, +Inf when none is; they are
 * non-decreasing. The key of x is x (TM_DISPLAY_KEY_VALUE: linear, signed-log) or |x|
 * (TM_DISPLAY_KEY_MAGNITUDE: log). A kernel then needs float64 comparisons only, which every backend
 * does exactly:
 *   NaN x:         colour (0, 0, 0, 0), counted in nan, not binned;
 *   key == +Inf:   k = 255;  key == -Inf: k = 0 (under the magnitude key both infinities give 255);
 *   finite key:    k = the number of thresholds <= key (0 .. 255);
 *   RGBA of x = table[k]; finite x adds 1 to bins[k]; +Inf and -Inf add 1 to pos_inf / neg_inf.
 * Output (output_size >= TM_DISPLAY_COLORIZE_COUNTS * 8 + element_count * 4):
 *   uint64_t counts[TM_DISPLAY_COLORIZE_COUNTS]: bins[0..255], then nan, pos_inf, neg_inf. ADDED to
 *     the output (the caller zeroes them once), so a tile can be coloured in pieces;
 *   then element_count * 4 bytes: R, G, B, A of each value in order (WRITTEN).
 * Exact on every backend (the same bytes and counts).
 */
#define TM_DISPLAY_THRESHOLDS 255u
#define TM_DISPLAY_COLORIZE_COUNTS 259u
#define TM_DISPLAY_KEY_VALUE 0u
#define TM_DISPLAY_KEY_MAGNITUDE 1u
typedef struct tm_display_colorize_params_v1 {
  uint32_t key_mode;                          /* TM_DISPLAY_KEY_VALUE or TM_DISPLAY_KEY_MAGNITUDE         */
  uint32_t reserved;                          /* 0                                                        */
  double thresholds[TM_DISPLAY_THRESHOLDS];   /* non-decreasing; may hold -Inf and +Inf, never NaN        */
  uint8_t table[256][4];                      /* RGBA of each colour index                                */
} tm_display_colorize_params_v1;

/* ---- TM_OP_STEM_SSB_OVERLAP --------------------------------------------------------------------------
 * Single-sideband ptychography's per-bright-field-pixel work (the physics and every convention:
 * src/stem/ssb/ssb.h): each pixel's scan spectrum G_b is corrected by the probe overlap, inverse transformed,
 * and the pixels are reduced. A format op: the call's format is the TM_SSB_* variant (quadratic χ, or the
 * direct overlap with higher orders), its dtype TM_DTYPE_F32.
 * Input: element_count = 2 * pixels * slice_stride float32: per pixel b, the Hermitian half plane
 *   G_b(i, j), i < rows, j <= cols / 2, as (re, im) pairs in row-major order, then padding up to
 *   slice_stride complex values.
 * Params: tm_stem_ssb_params_v1. Scan frequency q = i * cols + j; ν = nu[q] (detector frame, 1/Å);
 *   k = pixel_k[b]; in = |x|² <= kmax2 (float64). G = G_b(i, j) for j <= cols / 2, else
 *   conj G_b((rows - i) % rows, cols - j). For q != 0, with inside = in(k), minus = in(k - ν), plus = in(k + ν):
 *   TM_SSB_QUADRATIC: C_b(q) = G * row_factor[b][i] * col_factor[b][j] * w, with e = e_chi[q] and
 *     w = e (minus only), -conj(e) (plus only), i * 2 Im e / max(|2 Im e|, 1e-8) (both); C_b(q) = 0 when
 *     !inside or neither.
 *   TM_SSB_DIRECT: P(x) = in(x) * exp(-i χ(x)) with χ from chi_terms (χ(x) = Σ_t coefficient_t * |x|^power_t *
 *     cos(fold_t * (atan2(x_row, x_col) - angle_t))); Γ = P(k - ν) conj P(k) - conj P(k + ν) P(k);
 *     C_b(q) = G * conj Γ / max(|Γ|, 1e-8) (0 when !inside).
 *   C_b(0) = dc[b] (real). O_b = IFFT2(C_b) / (rows * cols) (numpy's ifft2).
 * Output (output_size >= rows * cols * 4 * 8): per scan position q, float64 Σ_b Re O_b, Σ_b Im O_b,
 *   Σ_b arg O_b, Σ_b (arg O_b)², WRITTEN.
 * Precision: G, C_b and the transforms in complex64, masks and sums in float64. Each backend is
 * deterministic (its result does not depend on threads or timing: the CPU sums min(pixels, 16) fixed
 * groups of consecutive pixels, each in pixel order, then the groups in order; Vulkan sums the pixels in
 * order); backends agree within the bound the parity tests state (phase 2e-4 rad, loss 1e-5 relative).
 */
#define TM_SSB_QUADRATIC 0u
#define TM_SSB_DIRECT 1u
typedef struct tm_ssb_chi_term_v1 {
  double coefficient;  /* radians per 1/Å^power */
  double power;        /* of |x| */
  double fold;         /* m */
  double angle;        /* radians */
} tm_ssb_chi_term_v1;
typedef struct tm_stem_ssb_params_v1 {
  uint32_t variant;                 /* TM_SSB_QUADRATIC or TM_SSB_DIRECT (= the call's format)          */
  uint32_t chi_term_count;          /* TM_SSB_DIRECT                                                     */
  uint64_t rows, cols;              /* the scan (each >= 2)                                              */
  uint64_t pixels;                  /* bright-field pixels b of this call                                */
  uint64_t slice_stride;            /* complex values from one pixel's G_b to the next (>= rows * (cols / 2 + 1)) */
  double kmax2;                     /* (α / λ)², 1/Å²                                                    */
  const double* pixel_k;            /* pixels x 2: k_b (row, col), 1/Å                                   */
  const double* dc;                 /* pixels: C_b(0)                                                    */
  const double* nu;                 /* rows * cols x 2: ν per scan frequency (row, col), 1/Å             */
  const double* e_chi;              /* TM_SSB_QUADRATIC: rows * cols x 2, e^{iχ(ν)}                      */
  const double* row_factor;         /* TM_SSB_QUADRATIC: pixels x rows x 2                               */
  const double* col_factor;         /* TM_SSB_QUADRATIC: pixels x cols x 2                               */
  const tm_ssb_chi_term_v1* chi_terms; /* TM_SSB_DIRECT                                                  */
  /* Optional host scratch a host kernel may use instead of allocating (>= tm_ssb_cpu_workspace_bytes;
   * 64-byte aligned), so repeated calls (a fit) do not pay for fresh pages; NULL: allocate. */
  void* workspace;
  uint64_t workspace_bytes;
} tm_stem_ssb_params_v1;

/* ---- TM_OP_DECODE_BITSHUFFLE_LZ4 ---------------------------------------------------------------------
 * Decodes chunks of HDF5 filter 32008 with LZ4 (bitshuffle; the layout: src/support/bitshuffle_lz4_decode.h),
 * e.g. a batch of 4D-STEM frames as Dectris detectors write them. dtype: the element type, whose width
 * (1, 2, 4 or 8 bytes) is bitshuffle's element size. element_count = chunk_count * chunk_elements.
 * Input: the chunks back to back; chunk i is input bytes [chunk_offsets[i], chunk_offsets[i + 1]), the
 * offsets starting at 0 and never decreasing (the input holds chunk_offsets[chunk_count] bytes).
 * Output: chunk i's elements at output element i * chunk_elements, WRITTEN; on a backend with `allocate`
 * the output may be a device buffer instead (output_buffer, plugin_abi.h), so decoded frames stay there for
 * the next ops. Exact: every backend writes the bytes the LZ4 library and the bit transpose give.
 * A chunk that does not decode to exactly chunk_elements elements (a header that disagrees, a block size
 * that is not a positive multiple of 8 elements or is more than one LZ4 block can hold,
 * TM_BITSHUFFLE_LZ4_MAX_BLOCK_BYTES, a truncated size prefix or block, an LZ4 error, a short
 * block, bytes left over) fails the call with TM_ERR_INVALID_ARGUMENT and a message that begins
 * "chunk <i>: " for the lowest such chunk and names its block and byte offset in the chunk; the output is
 * then unspecified. A backend never reads outside the input nor writes outside the output, whatever the
 * bytes say. One difference no compressor produces: a match offset of 0 (undefined in the LZ4 format) is
 * refused by the device backends ("offset 0"), while liblz4 1.9 (the CPU's decoder) copies whatever its
 * output buffer held there.
 */
/* The largest block a bitshuffle+LZ4 chunk header may declare, in bytes: LZ4's LZ4_MAX_INPUT_SIZE
 * (0x7E000000), the most one LZ4 block can encode. A larger block size cannot have been written by a
 * compressor, so the header is damaged even when the frame is smaller than the block. */
#define TM_BITSHUFFLE_LZ4_MAX_BLOCK_BYTES 0x7E000000ull

typedef struct tm_decode_bitshuffle_lz4_params_v1 {
  uint64_t chunk_count;
  uint64_t chunk_elements;        /* elements of every chunk, decoded                                  */
  const uint64_t* chunk_offsets;  /* chunk_count + 1 byte offsets into the input                       */
  /* The masking extension, read when params_size covers it (the first version ends at chunk_offsets;
   * core passes it only to a plugin whose table has `allocate`, and to the CPU). After a chunk decodes:
   * with TM_DECODE_ZERO_ALL_ONES, every element whose bits are all ones (an unsigned dtype's maximum, the
   * value Dectris writes for a masked pixel) becomes 0 and is counted into *all_ones_zeroed (host memory,
   * added to; may be NULL); then the elements listed in zero_elements (indices into a chunk, each below
   * chunk_elements, else the call is refused) become 0 in every chunk. On a failed chunk, *failed_chunk
   * (host memory; may be NULL) is set to the index the message names; it is left alone otherwise. */
  uint32_t flags;
  uint32_t reserved;              /* 0                                                                 */
  const uint32_t* zero_elements;
  uint64_t zero_element_count;
  uint64_t* all_ones_zeroed;
  uint64_t* failed_chunk;
} tm_decode_bitshuffle_lz4_params_v1;

/* Size of the first version of the params (without the masking extension). */
#define TM_DECODE_BITSHUFFLE_LZ4_PARAMS_BASE_SIZE (3 * 8)
enum { TM_DECODE_ZERO_ALL_ONES = 1u };
/* The CPU kernel's scratch: per reduction group a complex64 plane and four float64 sums per position. */
static inline uint64_t tm_ssb_cpu_workspace_bytes(uint64_t pixels, uint64_t rows, uint64_t cols) {
  const uint64_t groups = pixels < 16 ? pixels : 16;
  return groups * ((rows * cols * 8 + 63) / 64 * 64 + (rows * cols * 32 + 63) / 64 * 64);
}

/* ---- TM_OP_LOD_TILE_STATS ----------------------------------------------------------------------------
 * The level-0 tiles of a statistics pyramid (src/lod/pyramid.h) over one band of a tensor's 2-D view: the
 * exact partials the pyramid stores per tile, before its levels are merged and its bins chosen.
 * Input: params.rows x params.cols elements of dtype, row-major (element_count = rows * cols): the rows of
 * one row of tiles (rows <= the tile height), or for a one-row band any run of whole tiles of it.
 * Tile t covers every row and columns [t * tile_cols, min(cols, (t + 1) * tile_cols)); rows * tile_cols
 * <= TM_TILE_ELEMENTS. Output: one tm_tile_stats_v1 per tile (ceil(cols / tile_cols)), WRITTEN.
 * Params: tm_tile_stats_params_v1. The method fixes the float64 arithmetic (the caller chooses it, so a
 * tensor's tiles never depend on the backend); counts, min, max, abs_max and buckets are exact under each:
 *  - TM_TILE_PATTERNS (bf16, f16, f8_e4m3fn, f8_e5m2, i8, u8, bool): from the counts of the tile's bit
 *    patterns: sum and m2 over the distinct patterns in float64 about a shift (the first finite value of the
 *    tile's first row), summed again about the mean when the sum of squares loses more than 10 bits
 *    (backends/cpu/pattern_tiles.h states the order of every addition). Every element's pattern is also
 *    ADDED to params.pattern_counts (256 or 65,536 counts, host memory; may be NULL).
 *  - TM_TILE_SEGMENTS (f32, bf16, f16): each row's part of the tile as a segment, element i of a segment
 *    into float64 lane i % 16 (fused multiply-add for the squares), about the f32-rounded mean of the
 *    tile's first segment (backends/cpu/tile_kernels.h).
 *  - TM_TILE_WIDENED (every dtype): each row's part widened to float64, its statistics in 8 lanes about its
 *    first value, merged row after row by Chan's update (backends/cpu/widened_tiles.h).
 * A method the dtype does not take fails the call with TM_ERR_INVALID_ARGUMENT.
 */
#define TM_TILE_ELEMENTS 65536u
#define TM_TILE_BUCKETS 256u

typedef enum tm_tile_stats_method {
  TM_TILE_PATTERNS = 0,
  TM_TILE_SEGMENTS = 1,
  TM_TILE_WIDENED = 2
} tm_tile_stats_method;

typedef struct tm_tile_stats_params_v1 {
  uint64_t rows;             /* rows of the input, >= 1                                                */
  uint64_t cols;             /* columns of the input, >= 1                                             */
  uint32_t tile_cols;        /* tile width, a power of two; rows * tile_cols <= TM_TILE_ELEMENTS       */
  uint32_t method;           /* tm_tile_stats_method                                                   */
  uint64_t* pattern_counts;  /* TM_TILE_PATTERNS: counts per raw bit pattern, added to; may be NULL    */
} tm_tile_stats_params_v1;

typedef struct tm_tile_stats_v1 {
  uint64_t count;    /* elements of the tile, NaN and +-Inf included                                      */
  uint64_t nan_count, inf_count, zero_count;
  double min, max;   /* over the finite values; +Inf / -Inf when none                                     */
  double abs_max;    /* over the finite values; 0 when none                                               */
  double sum;        /* of the finite values (float64, the method's order)                                 */
  double m2;         /* sum of squared deviations from their mean, >= 0                                    */
  /* The finite values per order bucket: the top 8 bits of the order key (the bit pattern remapped so that
   * unsigned order is value order: floats' negative patterns complemented, the others with the sign bit set;
   * signed integers with the sign bit flipped). */
  uint32_t buckets[TM_TILE_BUCKETS];
} tm_tile_stats_v1;

/* ---- TM_OP_DIFF_TILE_STATS ---------------------------------------------------------------------------
 * The level-0 tiles of a difference pyramid (src/diff/diff_pyramid.h) over rows of one band of a tensor pair's
 * 2-D view. dtype TM_DTYPE_F64; input = a (A's values), params.b = b (B's), params.rows x params.cols float64
 * values each, row-major (element_count = rows * cols). Tile t covers every row and columns
 * [t * tile_cols, min(cols, (t + 1) * tile_cols)). Output: one tm_diff_tile_v1 per tile (ceil(cols / tile_cols)),
 * ADDED TO: the caller starts each tile from tm_diff_tile_empty() and may pass a band's rows in several calls.
 * Per pair, Δ = b - a in float64. A pair where a or b is NaN or infinite counts in nonfinite (and in changed
 * unless a == b or both are NaN) and nowhere else; every other pair counts in changed when Δ != 0 (so -0 against +0 is
 * unchanged) and in buckets[bucket of Δ] (its sign and binade: Δ >= 0 with 2^k <= Δ < 2^(k+1) is 192 + k,
 * Δ < 0 with 2^k <= |Δ| < 2^(k+1) is 63 - k, k in [-63, 63] clamped above; |Δ| < 2^-63 is 128 when Δ >= 0
 * and 127 otherwise). Counts, buckets, max |Δ|, min Δ and max Δ are exact.
 * The five sums (Δ, Δ², a², b², a·b over finite pairs) have a fixed float64 order, so a tile never depends on the
 * backend or the vector width: each row's part of a tile is a segment. A segment whose pairs are all finite puts
 * pair i into lane i % 8 of 8 TwoSum lanes per sum (t = s + x; e = t - s; c += (s - (t - e)) + (x - e); s = t;
 * lanes start at 0), then merges the lanes in lane order into the tile's sums by Neumaier's rule (add the lane's
 * s, then add its c to the tile's compensation). A segment holding a non-finite pair adds its finite pairs one by
 * one by Neumaier's rule (t = S + x; C += |S| >= |x| ? (S - t) + x : (x - t) + S; S = t). No operation is fused.
 */
typedef struct tm_diff_tile_params_v1 {
  const double* b;     /* B's values, as many as the input's                                         */
  uint64_t rows;       /* rows of the input, >= 1                                                    */
  uint64_t cols;       /* columns of the input, >= 1                                                 */
  uint64_t tile_cols;  /* tile width, >= 1                                                           */
} tm_diff_tile_params_v1;

#define TM_DIFF_BUCKETS 256u

typedef struct tm_diff_tile_v1 {
  uint64_t count;        /* pairs                                                                    */
  uint64_t changed;      /* pairs whose values differ (a NaN against a NaN does not)                 */
  uint64_t nonfinite;    /* pairs where a or b is NaN or infinite                                    */
  double max_abs;        /* max |Δ| over finite pairs (0 when none)                                  */
  double min_delta;      /* min Δ over finite pairs (+Inf when none)                                 */
  double max_delta;      /* max Δ over finite pairs (-Inf when none)                                 */
  double sum[5];         /* Σ Δ, Σ Δ², Σ a², Σ b², Σ a·b over finite pairs (Neumaier sums)           */
  double compensation[5];/* their running compensations: a sum's value is sum + compensation         */
  uint64_t buckets[TM_DIFF_BUCKETS]; /* finite Δ per bucket (sign and binade, above)                 */
} tm_diff_tile_v1;

/* A tile before any pair is added. */
static inline tm_diff_tile_v1 tm_diff_tile_empty(void) {
  tm_diff_tile_v1 t;
  memset(&t, 0, sizeof t);
  t.min_delta = __builtin_inf();
  t.max_delta = -__builtin_inf();
  return t;
}

/* Ops whose kernels' dtype_mask holds stored formats (ggml type ids, TM_PACKED_* schemes, TM_SSB_* variants) rather than
 * dtypes; their calls' dtype is TM_DTYPE_F32, the output type. */
static inline int tm_op_takes_format(tm_op op) {
  return op == TM_OP_DEQUANTIZE_GGML || op == TM_OP_GGML_BLOCK_STATS || op == TM_OP_DEQUANTIZE_PACKED ||
         op == TM_OP_QUANT_MOMENTS || op == TM_OP_STEM_SSB_OVERLAP;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TENSORMORPH_OP_CONTRACTS_H */
