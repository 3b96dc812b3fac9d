#include "stem_kernels.h"

#include <algorithm>

#include "core/thread_pool.h"

namespace tmorph::cpu {

namespace {

// The sums of one frame (contract: TM_OP_STEM_FRAME_SUMS). Rows are walked once for the total and the
// whole-frame centre of mass; pixel lists are gathered.
template <class T>
void frame_sums(const T* px, const tm_stem_frame_sums_params_v1& p, uint64_t* out) {
  const uint64_t cols = p.cols, rows = p.pixels_per_frame / cols;
  uint64_t total = 0, sum_row = 0, sum_col = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    const T* row = px + r * cols;
    uint64_t row_total = 0, row_col = 0;
    for (uint64_t c = 0; c < cols; ++c) {
      row_total += row[c];
      row_col += c * row[c];
    }
    total += row_total;
    sum_row += r * row_total;
    sum_col += row_col;
  }
  out[0] = total;
  if (p.com_list == TM_STEM_ALL_PIXELS) {
    out[1] = total, out[2] = sum_row, out[3] = sum_col;
  } else {
    uint64_t w = 0, sr = 0, sc = 0;
    for (uint64_t i = p.list_offsets[p.com_list]; i < p.list_offsets[p.com_list + 1]; ++i) {
      const uint32_t k = p.list_pixels[i];
      const uint64_t v = px[k];
      w += v, sr += (k / cols) * v, sc += (k % cols) * v;
    }
    out[1] = w, out[2] = sr, out[3] = sc;
  }
  for (uint32_t j = 0; j < p.list_count; ++j) {
    uint64_t s = 0;
    for (uint64_t i = p.list_offsets[j]; i < p.list_offsets[j + 1]; ++i) s += px[p.list_pixels[i]];
    out[TM_STEM_FRAME_SUMS_FIXED + j] = s;
  }
}

template <class T>
void pattern_reduce(const T* px, uint64_t frames, uint64_t pixels, uint64_t begin, uint64_t end, uint64_t* sums,
                    uint32_t* maxima) {
  for (uint64_t f = 0; f < frames; ++f) {
    const T* frame = px + f * pixels;
    for (uint64_t i = begin; i < end; ++i) {
      sums[i] += frame[i];
      maxima[i] = std::max<uint32_t>(maxima[i], frame[i]);
    }
  }
}

bool frame_dtype(tm_dtype d) { return d == TM_DTYPE_U8 || d == TM_DTYPE_U16 || d == TM_DTYPE_U32; }

}  // namespace

tm_status run_stem_frame_sums(const tm_kernel_call_v1& c, std::string* error) {
  if (!c.params || c.params_size < sizeof(tm_stem_frame_sums_params_v1))
    return *error = "stem.frame_sums: params missing", TM_ERR_INVALID_ARGUMENT;
  const auto& p = *static_cast<const tm_stem_frame_sums_params_v1*>(c.params);
  if (!frame_dtype(c.dtype)) return *error = "stem.frame_sums: frames must be u8, u16 or u32", TM_ERR_UNSUPPORTED;
  if (p.pixels_per_frame == 0 || p.cols == 0 || p.pixels_per_frame % p.cols != 0 || c.element_count % p.pixels_per_frame != 0)
    return *error = "stem.frame_sums: element_count must be whole frames of whole rows", TM_ERR_INVALID_ARGUMENT;
  if (p.list_count && (!p.list_offsets || !p.list_pixels || p.list_offsets[0] != 0))
    return *error = "stem.frame_sums: pixel lists missing", TM_ERR_INVALID_ARGUMENT;
  if (p.com_list != TM_STEM_ALL_PIXELS && p.com_list >= p.list_count)
    return *error = "stem.frame_sums: com_list names no list", TM_ERR_INVALID_ARGUMENT;
  for (uint32_t j = 0; j < p.list_count; ++j)
    for (uint64_t i = p.list_offsets[j]; i < p.list_offsets[j + 1]; ++i)
      if (p.list_pixels[i] >= p.pixels_per_frame || (i > p.list_offsets[j] && p.list_pixels[i] <= p.list_pixels[i - 1]))
        return *error = "stem.frame_sums: list " + std::to_string(j) + " is not strictly increasing inside the frame",
               TM_ERR_INVALID_ARGUMENT;
  const uint64_t frames = c.element_count / p.pixels_per_frame;
  const uint64_t row_values = TM_STEM_FRAME_SUMS_FIXED + p.list_count;
  if (c.output_size < frames * row_values * sizeof(uint64_t)) return *error = "stem.frame_sums: output too small", TM_ERR_INVALID_ARGUMENT;
  auto* out = static_cast<uint64_t*>(c.output);
  ThreadPool::shared(std::max(1u, c.threads)).parallel_for(frames, [&](uint64_t begin, uint64_t end, unsigned) {
    for (uint64_t f = begin; f < end; ++f) {
      uint64_t* o = out + f * row_values;
      switch (c.dtype) {
        case TM_DTYPE_U8: frame_sums(static_cast<const uint8_t*>(c.input) + f * p.pixels_per_frame, p, o); break;
        case TM_DTYPE_U16: frame_sums(static_cast<const uint16_t*>(c.input) + f * p.pixels_per_frame, p, o); break;
        default: frame_sums(static_cast<const uint32_t*>(c.input) + f * p.pixels_per_frame, p, o); break;
      }
    }
  });
  return TM_OK;
}

tm_status run_stem_pattern_reduce(const tm_kernel_call_v1& c, std::string* error) {
  if (!c.params || c.params_size < sizeof(tm_stem_pattern_params_v1))
    return *error = "stem.pattern_reduce: params missing", TM_ERR_INVALID_ARGUMENT;
  const uint64_t pixels = static_cast<const tm_stem_pattern_params_v1*>(c.params)->pixels_per_frame;
  if (!frame_dtype(c.dtype)) return *error = "stem.pattern_reduce: frames must be u8, u16 or u32", TM_ERR_UNSUPPORTED;
  if (pixels == 0 || c.element_count % pixels != 0)
    return *error = "stem.pattern_reduce: element_count must be whole frames", TM_ERR_INVALID_ARGUMENT;
  if (c.output_size < pixels * (sizeof(uint64_t) + sizeof(uint32_t)))
    return *error = "stem.pattern_reduce: output too small", TM_ERR_INVALID_ARGUMENT;
  const uint64_t frames = c.element_count / pixels;
  auto* sums = static_cast<uint64_t*>(c.output);
  auto* maxima = reinterpret_cast<uint32_t*>(sums + pixels);
  // Threads own pixel ranges (a multiple of 64 pixels each), every frame in order.
  const uint64_t pieces = (pixels + 63) / 64;
  ThreadPool::shared(std::max(1u, c.threads)).parallel_for(pieces, [&](uint64_t begin, uint64_t end, unsigned) {
    const uint64_t b = begin * 64, e = std::min(pixels, end * 64);
    switch (c.dtype) {
      case TM_DTYPE_U8: pattern_reduce(static_cast<const uint8_t*>(c.input), frames, pixels, b, e, sums, maxima); break;
      case TM_DTYPE_U16: pattern_reduce(static_cast<const uint16_t*>(c.input), frames, pixels, b, e, sums, maxima); break;
      default: pattern_reduce(static_cast<const uint32_t*>(c.input), frames, pixels, b, e, sums, maxima); break;
    }
  });
  return TM_OK;
}

}  // namespace tmorph::cpu
