// The calibration calls of the op table's rows (calibration_calls.h). Each reads the sample as its op needs it;
// the shapes are what `tensormorph calibrate` has always timed, so calibrations stay comparable.
#include "compute/calibration_calls.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "support/bitshuffle_lz4_decode.h"
#include "tensormorph/contract_math.h"
#include "tensormorph/op_contracts.h"

namespace tmorph {

namespace {

template <class P>
void set_params(CalibrationCall& c, const P& p) {
  c.params.resize(sizeof p);
  std::memcpy(c.params.data(), &p, sizeof p);
}

uint64_t moments_partials_bytes(uint64_t elements) {
  return (elements + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS * sizeof(tm_moments_partial_v1);
}

// Q8_0 blocks (34 bytes per 32 values): the sample read as ggml blocks.
void as_q8_0(CalibrationCall& c, const void* data, uint64_t elements) {
  set_params(c, tm_dequantize_ggml_params_v1{8, 0});
  c.dtype = DType::F32, c.input = data, c.elements = elements / 32 * 32;
}

constexpr uint64_t kFramePixels = 4096;  // 4D-STEM ops read the sample as 64 x 64 frames with no pixel lists

}  // namespace

namespace calibration_calls {

void stats_moments(CalibrationCall& c, DType dtype, const void* data, uint64_t elements) {
  c.dtype = dtype, c.input = data, c.elements = elements;
  c.output_bytes = moments_partials_bytes(elements);
}

void lod_tile_stats(CalibrationCall& c, DType dtype, const void* data, uint64_t elements) {
  // The sample as bands of 256 rows in tiles of 256 x 256 (a matrix's level 0), whole rows of 256 only, under
  // the method a pyramid asks of the dtype; its pattern counts (when any) go to u64s.
  const uint32_t dt = static_cast<uint32_t>(dtype);
  const uint32_t method = tile_stats_method_takes(TM_TILE_PATTERNS, dt)   ? TM_TILE_PATTERNS
                          : tile_stats_method_takes(TM_TILE_SEGMENTS, dt) ? TM_TILE_SEGMENTS
                                                                           : TM_TILE_WIDENED;
  const uint64_t cols = std::max<uint64_t>(1, elements / 256);
  if (method == TM_TILE_PATTERNS) c.u64s.assign(size_t{1} << (8 * dtype_size(dtype)), 0);
  set_params(c, tm_tile_stats_params_v1{std::min<uint64_t>(256, elements ? elements : 1), cols, 256, method,
                                        c.u64s.empty() ? nullptr : c.u64s.data()});
  const auto& p = *reinterpret_cast<const tm_tile_stats_params_v1*>(c.params.data());
  c.dtype = dtype, c.input = data, c.elements = p.rows * p.cols;
  c.output_bytes = (p.cols + 255) / 256 * sizeof(tm_tile_stats_v1);
}

void stats_histogram(CalibrationCall& c, DType dtype, const void* data, uint64_t elements) {
  c.dtype = dtype, c.input = data, c.elements = elements;
  c.doubles.resize(257);  // 256 bins over [-4, 4]
  for (size_t i = 0; i < c.doubles.size(); ++i) c.doubles[i] = -4.0 + 8.0 * static_cast<double>(i) / 256.0;
  set_params(c, tm_histogram_params_v1{256, c.doubles.data()});
  c.output_bytes = 258 * sizeof(uint64_t);
}

void stats_bitpattern_histogram(CalibrationCall& c, DType dtype, const void* data, uint64_t elements) {
  c.dtype = dtype, c.input = data, c.elements = elements;
  c.output_bytes = (size_t{1} << (8 * dtype_size(dtype))) * sizeof(uint64_t);
}

void stats_quantiles(CalibrationCall& c, DType dtype, const void* data, uint64_t elements) {
  c.dtype = dtype, c.input = data, c.elements = elements;
  c.doubles = {0.5};
  set_params(c, tm_quantiles_params_v1{1, c.doubles.data(), 0});
  c.output_bytes = sizeof(tm_quantile_value_v1);
}

void dequantize_ggml(CalibrationCall& c, DType, const void* data, uint64_t elements) {
  as_q8_0(c, data, elements);
  c.output_bytes = c.elements * sizeof(float);
}

void quant_moments(CalibrationCall& c, DType, const void* data, uint64_t elements) {
  as_q8_0(c, data, elements);  // one partial per canonical block
  c.output_bytes = moments_partials_bytes(c.elements);
}

void ggml_block_stats(CalibrationCall& c, DType, const void* data, uint64_t elements) {
  c.floats.resize(elements / 32);  // the scales written
  set_params(c, tm_ggml_block_stats_params_v1{8, 0, c.floats.data(), nullptr});
  c.dtype = DType::F32, c.input = data, c.elements = elements / 32 * 32;
  c.output_bytes = sizeof(tm_ggml_block_stats_v1);
}

void dequantize_packed(CalibrationCall& c, DType, const void* data, uint64_t elements) {
  c.floats = {1.0f};  // FP8 E4M3 codes, one row, one scale
  tm_dequantize_packed_params_v1 fp8{};
  fp8.scheme = TM_PACKED_FP8, fp8.code_dtype = TM_DTYPE_F8_E4M3FN;
  fp8.rows = 1, fp8.cols = elements, fp8.block_rows = 1, fp8.block_cols = elements, fp8.scales = c.floats.data();
  set_params(c, fp8);
  c.dtype = DType::F32, c.input = data, c.elements = elements;
  c.output_bytes = elements * sizeof(float);
}

void diff_moments(CalibrationCall& c, DType dtype, const void* data, uint64_t elements) {
  set_params(c, tm_diff_params_v1{static_cast<const float*>(data)});  // the data against itself
  c.dtype = dtype, c.input = data, c.elements = elements;
  c.output_bytes = (elements + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS * sizeof(tm_diff_partial_v1);
}

void diff_tile_stats(CalibrationCall& c, DType dtype, const void* data, uint64_t elements) {
  // The float64 sample against itself, as rows of 4096 in tiles of 256 (a matrix's level 0).
  const uint64_t cols = std::min<uint64_t>(4096, std::max<uint64_t>(1, elements)), rows = std::max<uint64_t>(1, elements / cols);
  set_params(c, tm_diff_tile_params_v1{static_cast<const double*>(data), rows, cols, 256});
  c.dtype = dtype, c.input = data, c.elements = rows * cols;
  c.output_bytes = (cols + 255) / 256 * sizeof(tm_diff_tile_v1);
}

void stem_frame_sums(CalibrationCall& c, DType dtype, const void* data, uint64_t elements) {
  set_params(c, tm_stem_frame_sums_params_v1{kFramePixels, 64, 0, nullptr, nullptr, TM_STEM_ALL_PIXELS, 0});
  c.dtype = dtype, c.input = data, c.elements = elements / kFramePixels * kFramePixels;
  c.output_bytes = c.elements / kFramePixels * TM_STEM_FRAME_SUMS_FIXED * sizeof(uint64_t);
}

void stem_compact_sums(CalibrationCall& c, DType dtype, const void* data, uint64_t elements) {
  // The sample's bytes as 64 x 64 frames, every 8th pixel kept (512 entries of uint16 key and uint32 running total
  // each), packed into pages of the contract's layout; about as many image bytes as sample bytes. One list: the
  // frame's first half.
  const auto* sample = static_cast<const uint8_t*>(data);
  const uint64_t sample_bytes = elements * dtype_size(dtype), per_frame = 512;
  const uint64_t frame_words = 1 + per_frame / 2 + per_frame, per_page = (TM_STEM_COMPACT_PAGE_BYTES / 4 - 3) / frame_words;
  const uint64_t frames = std::max<uint64_t>(1, sample_bytes / (frame_words * 4)), pages = (frames + per_page - 1) / per_page;
  const uint64_t last = frames - (pages - 1) * per_page;
  c.bytes.assign((pages - 1) * TM_STEM_COMPACT_PAGE_BYTES + (3 + last * frame_words) * 4, 0);
  c.u64s.assign(pages + 1 + kFramePixels, 0);
  for (uint64_t page = 0; page < pages; ++page) {
    const uint64_t n = page + 1 < pages ? per_page : last;
    c.u64s[page + 1] = c.u64s[page] + n;
    std::vector<uint32_t> w(3 + n * frame_words, 0);
    w[0] = static_cast<uint32_t>(n), w[1] = static_cast<uint32_t>(n * per_frame);
    const uint64_t keys_at = 3 + n, totals_at = keys_at + n * per_frame / 2;
    for (uint64_t j = 0; j < n; ++j) {
      w[3 + j] = static_cast<uint32_t>((j + 1) * per_frame);
      uint32_t total = 0;
      for (uint64_t e = 0; e < per_frame; ++e) {
        const uint64_t k = j * per_frame + e, at = ((page * per_page + j) * per_frame + e) % std::max<uint64_t>(1, sample_bytes);
        w[keys_at + k / 2] |= static_cast<uint32_t>(e * 8) << (16 * (k % 2));
        total += 1u + (sample_bytes ? sample[at] : 0u);
        w[totals_at + k] = total;
      }
    }
    std::memcpy(c.bytes.data() + page * TM_STEM_COMPACT_PAGE_BYTES, w.data(), w.size() * 4);
  }
  uint64_t* key_lists = c.u64s.data() + pages + 1;
  for (uint64_t k = 0; k < kFramePixels / 2; ++k) key_lists[k] = 1;
  c.u32s.resize(frames);
  for (uint64_t i = 0; i < frames; ++i) c.u32s[i] = static_cast<uint32_t>(i);
  tm_stem_compact_sums_params_v1 p{};
  p.pixels_per_frame = kFramePixels, p.cols = 64, p.key_bytes = 2, p.page_count = static_cast<uint32_t>(pages), p.list_count = 1;
  p.page_first = c.u64s.data(), p.positions = c.u32s.data(), p.position_count = frames, p.key_lists = key_lists;
  p.pixel_of_key = nullptr, p.com_list = TM_STEM_ALL_PIXELS, p.flags = 0, p.list_ranges = nullptr;
  set_params(c, p);
  c.dtype = DType::U8, c.input = c.bytes.data(), c.elements = c.bytes.size();
  c.output_bytes = frames * (TM_STEM_FRAME_SUMS_FIXED + 1) * sizeof(uint64_t);
}

void stem_pattern_reduce(CalibrationCall& c, DType dtype, const void* data, uint64_t elements) {
  set_params(c, tm_stem_pattern_params_v1{kFramePixels});
  c.dtype = dtype, c.input = data, c.elements = elements / kFramePixels * kFramePixels;
  // Integer frames: uint64 sums + uint32 maxima per pixel; float frames (F32, F64): float64 sums + float64 maxima.
  const bool float_frames = dtype == DType::F32 || dtype == DType::F64;
  c.output_bytes = kFramePixels * (float_frames ? 2 * sizeof(double) : sizeof(uint64_t) + sizeof(uint32_t));
}

void display_colorize(CalibrationCall& c, DType dtype, const void* data, uint64_t elements) {
  // Linear thresholds over [-4, 4] (the histogram's range) and a grey table.
  tm_display_colorize_params_v1 p{};
  p.key_mode = TM_DISPLAY_KEY_VALUE;
  for (uint32_t k = 1; k <= TM_DISPLAY_THRESHOLDS; ++k) p.thresholds[k - 1] = -4.0 + 8.0 * k / 256.0;
  for (uint32_t k = 0; k < 256; ++k) p.table[k][0] = p.table[k][1] = p.table[k][2] = static_cast<uint8_t>(k), p.table[k][3] = 255;
  set_params(c, p);
  c.dtype = dtype, c.input = data, c.elements = elements;
  c.output_bytes = TM_DISPLAY_COLORIZE_COUNTS * sizeof(uint64_t) + elements * 4;
}

void stem_ssb_overlap(CalibrationCall& c, DType dtype, const void* data, uint64_t elements) {
  // The sample's first floats as G of up to 64 bright-field pixels over a 16 x 16 scan (quadratic variant, zero
  // aberrations, pixels spread over a disk of radius 1).
  constexpr uint64_t scan = 16, stride = scan * (scan / 2 + 1), n = scan * scan;
  const uint64_t pixels = std::clamp<uint64_t>(elements / (2 * stride), 1, 64);
  c.floats.assign(2 * pixels * stride, 0.0f);
  if (dtype == DType::F32) std::memcpy(c.floats.data(), data, std::min<uint64_t>(elements, c.floats.size()) * 4);
  // doubles: pixel k (2B), dc (B), nu (2N), e_chi (2N), row factors (2BR), column factors (2BR)
  c.doubles.assign(2 * pixels + pixels + 4 * n + 4 * pixels * scan, 0.0);
  double* k = c.doubles.data();
  double* dc = k + 2 * pixels;
  double* nu = dc + pixels;
  double* e = nu + 2 * n;
  double* row = e + 2 * n;
  double* col = row + 2 * pixels * scan;
  for (uint64_t b = 0; b < pixels; ++b) k[2 * b] = std::cos(b * 0.1) * 0.5, k[2 * b + 1] = std::sin(b * 0.1) * 0.5, dc[b] = 1.0;
  for (uint64_t q = 0; q < n; ++q) nu[2 * q] = ((q / scan) % 8) * 0.1, nu[2 * q + 1] = ((q % scan) % 8) * 0.1, e[2 * q] = 1;
  for (uint64_t i = 0; i < pixels * scan; ++i) row[2 * i] = col[2 * i] = 1;
  tm_stem_ssb_params_v1 p{};
  p.variant = TM_SSB_QUADRATIC, p.rows = p.cols = scan, p.pixels = pixels, p.slice_stride = stride;
  p.kmax2 = 1, p.pixel_k = k, p.dc = dc, p.nu = nu, p.e_chi = e, p.row_factor = row, p.col_factor = col;
  set_params(c, p);
  c.dtype = DType::F32, c.input = c.floats.data(), c.elements = c.floats.size();
  c.output_bytes = n * 32;
}

void decode_bitshuffle_lz4(CalibrationCall& c, DType dtype, const void* data, uint64_t elements) {
  // 64 KiB chunks of `dtype` elements as the sample's bytes would decode to (written without a compressor: each
  // 8 KiB block is literals and one long match, support/bitshuffle_lz4_decode.h).
  const uint32_t width = static_cast<uint32_t>(dtype_size(dtype));
  const uint64_t per_chunk = 65536 / width, chunks = std::max<uint64_t>(1, elements / per_chunk);
  const auto* first = static_cast<const uint8_t*>(data);
  const std::vector<uint8_t> literals(first, first + std::min<uint64_t>(elements * width, 1 << 20));
  const auto chunk = bitshuffle_lz4_chunk_without_compressor(per_chunk, width, bitshuffle_default_block_elements(width), literals);
  c.u64s.assign(1, 0);
  for (uint64_t i = 0; i < chunks; ++i) {
    c.bytes.insert(c.bytes.end(), chunk.begin(), chunk.end());
    c.u64s.push_back(c.bytes.size());
  }
  set_params(c, decode_params(chunks, per_chunk, c.u64s.data()));
  c.dtype = dtype, c.input = c.bytes.data(), c.elements = chunks * per_chunk;
  c.output_bytes = chunks * per_chunk * width;
}

}  // namespace calibration_calls

}  // namespace tmorph
