#include "stem_kernels.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "support/thread_pool.h"
#include "tensormorph/contract_math.h"

namespace tmorph::cpu {

namespace {

// Accumulators wide enough for one row or one column of a frame: uint32 for 8- and 16-bit pixels (a
// row or column of at most 65,536 pixels of at most 65,535 sums below 2^32), uint64 for 32-bit pixels.
template <class T>
using LineSum = std::conditional_t<sizeof(T) <= 2, uint32_t, uint64_t>;

// The sums of one frame (contract: TM_OP_STEM_FRAME_SUMS). One sweep over the rows accumulates each row's
// total and the column totals (both vectorise as widening adds); Σ row·I and Σ col·I then come from those
// rows × cols totals, exactly. Pixel lists are gathered.
// A pixel list as runs of consecutive pixels (first pixel, count): an annulus is a few runs per row, and
// summing runs vectorises where gathering pixel by pixel does not.
struct Run {
  uint32_t first, count;
};
struct RunLists {
  std::vector<Run> runs;
  std::vector<uint64_t> offsets{0};  // list j's runs: runs[offsets[j] .. offsets[j + 1])
  // A list of many short runs (an annulus: two runs of a few pixels per row) is summed instead as one
  // sweep over the span each row's pixels lie in, with a 0 / all-ones mask, which vectorises fully:
  // masks[j] is empty for lists summed by runs, else one mask per pixel of rows [mask_rows[j].first,
  // mask_rows[j].second), and spans[j][row - first] the columns [begin, end) swept in that row.
  std::vector<std::vector<uint32_t>> masks;
  std::vector<std::pair<uint64_t, uint64_t>> mask_rows;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> spans;
};

// Runs shorter than this on average make the masked sweep the cheaper way (measured on annuli).
constexpr uint64_t kMaskedSweepMaxRunLength = 32;

RunLists to_runs(const tm_stem_frame_sums_params_v1& p) {
  RunLists out;
  for (uint32_t j = 0; j < p.list_count; ++j) {
    for (uint64_t i = p.list_offsets[j]; i < p.list_offsets[j + 1]; ++i) {
      const uint32_t k = p.list_pixels[i];
      const bool extends = i > p.list_offsets[j] && out.runs.back().first + out.runs.back().count == k && k % p.cols != 0;
      if (extends) ++out.runs.back().count;
      else out.runs.push_back({k, 1});
    }
    out.offsets.push_back(out.runs.size());
    const uint64_t runs = out.offsets[j + 1] - out.offsets[j], pixels = p.list_offsets[j + 1] - p.list_offsets[j];
    out.masks.emplace_back();
    out.mask_rows.emplace_back(0, 0);
    out.spans.emplace_back();
    if (runs >= 8 && pixels < kMaskedSweepMaxRunLength * runs) {
      const uint64_t r0 = p.list_pixels[p.list_offsets[j]] / p.cols, r1 = p.list_pixels[p.list_offsets[j + 1] - 1] / p.cols + 1;
      auto& mask = out.masks.back();
      mask.assign((r1 - r0) * p.cols, 0);
      auto& spans = out.spans.back();
      spans.assign(r1 - r0, {UINT32_MAX, 0});
      for (uint64_t i = p.list_offsets[j]; i < p.list_offsets[j + 1]; ++i) {
        const uint64_t k = p.list_pixels[i], r = k / p.cols - r0;
        const uint32_t c = static_cast<uint32_t>(k % p.cols);
        mask[k - r0 * p.cols] = ~uint32_t{0};
        spans[r] = {std::min(spans[r].first, c), std::max(spans[r].second, c + 1)};
      }
      for (auto& s : spans)
        if (s.first > s.second) s = {0, 0};  // a row without pixels of the list
      out.mask_rows.back() = {r0, r1};
    }
  }
  return out;
}

template <class T>
void frame_sums(const T* px, const tm_stem_frame_sums_params_v1& p, const RunLists& lists, uint64_t* out,
                std::vector<LineSum<T>>& col_total) {
  const uint64_t cols = p.cols, rows = p.pixels_per_frame / cols;
  const auto list_sums = [&] {
    for (uint32_t j = 0; j < p.list_count; ++j) {
      uint64_t s = 0;
      if (!lists.masks[j].empty()) {
        const auto [r0, r1] = lists.mask_rows[j];
        const uint32_t* m = lists.masks[j].data();
        const auto* span = lists.spans[j].data();
        for (uint64_t r = r0; r < r1; ++r, m += cols, ++span) {
          const T* row = px + r * cols;
          LineSum<T> rs = 0;
          for (uint64_t c = span->first; c < span->second; ++c) rs += row[c] & static_cast<T>(m[c]);
          s += rs;
        }
        out[TM_STEM_FRAME_SUMS_FIXED + j] = s;
        continue;
      }
      for (uint64_t i = lists.offsets[j]; i < lists.offsets[j + 1]; ++i) {
        const Run run = lists.runs[i];
        LineSum<T> rs = 0;  // a run lies inside one row
        for (uint32_t k = 0; k < run.count; ++k) rs += px[run.first + k];
        s += rs;
      }
      out[TM_STEM_FRAME_SUMS_FIXED + j] = s;
    }
  };
  if (p.flags & TM_STEM_LISTS_ONLY) {
    out[0] = out[1] = out[2] = out[3] = 0;
    list_sums();
    return;
  }
  std::fill(col_total.begin(), col_total.end(), LineSum<T>{0});
  LineSum<T>* ct = col_total.data();
  uint64_t total = 0, sum_row = 0, sum_col = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    const T* row = px + r * cols;
    LineSum<T> row_total = 0;
    for (uint64_t c = 0; c < cols; ++c) {
      row_total += row[c];
      ct[c] += row[c];
    }
    total += row_total;
    sum_row += r * row_total;
  }
  for (uint64_t c = 0; c < cols; ++c) sum_col += c * ct[c];
  out[0] = total;
  if (p.com_list == TM_STEM_ALL_PIXELS) {
    out[1] = total, out[2] = sum_row, out[3] = sum_col;
  } else {  // runs never cross a row, so each run's row is that of its first pixel
    uint64_t w = 0, sr = 0, sc = 0;
    for (uint64_t i = lists.offsets[p.com_list]; i < lists.offsets[p.com_list + 1]; ++i) {
      const Run run = lists.runs[i];
      const uint64_t r = run.first / cols, c0 = run.first % cols;
      uint64_t rs = 0, cs = 0;
      for (uint32_t k = 0; k < run.count; ++k) rs += px[run.first + k], cs += (c0 + k) * px[run.first + k];
      w += rs, sr += r * rs, sc += cs;
    }
    out[1] = w, out[2] = sr, out[3] = sc;
  }
  list_sums();  // after the sweep: the frame is in cache
}

// Sums over frames accumulate in LineSum<T> partials for at most 65,536 frames at a time (exact: 65,536
// 16-bit values stay below 2^32), then move into the uint64 sums.
template <class T>
void pattern_reduce(const T* px, uint64_t frames, uint64_t pixels, uint64_t begin, uint64_t end, uint64_t* sums,
                    uint32_t* maxima) {
  std::vector<LineSum<T>> partial(end - begin);
  for (uint64_t f0 = 0; f0 < frames; f0 += 65536) {
    std::fill(partial.begin(), partial.end(), LineSum<T>{0});
    for (uint64_t f = f0; f < std::min(frames, f0 + 65536); ++f) {
      const T* frame = px + f * pixels + begin;
      uint32_t* m = maxima + begin;
      for (uint64_t i = 0; i < end - begin; ++i) {
        partial[i] += frame[i];
        m[i] = std::max<uint32_t>(m[i], frame[i]);
      }
    }
    for (uint64_t i = 0; i < end - begin; ++i) sums[begin + i] += partial[i];
  }
}

// Float frames (contract: the float paragraphs of TM_OP_STEM_FRAME_SUMS): every sum is one float64 accumulator
// fed pixel by pixel in increasing pixel order, never reassociated (no partial sums, no vector lanes), so
// the result is numpy's sequential np.cumsum(...)[-1] bit for bit. One chain of dependent additions is bound by
// the adder's latency, so N frames are summed side by side (N independent chains, each frame still in its own
// order): px[j] is frame j's pixels, out[j] its output row.
template <class T, int N>
void float_frame_sums(const T* const* px, const tm_stem_frame_sums_params_v1& p, double* const* out) {
  const uint64_t cols = p.cols, n = p.pixels_per_frame;
  const auto list_sum = [&](uint32_t j, uint32_t slot, bool moments) {
    double s[N] = {}, r[N] = {}, c[N] = {};
    for (uint64_t i = p.list_offsets[j]; i < p.list_offsets[j + 1]; ++i) {
      const uint32_t k = p.list_pixels[i];
      if (!moments) {
        for (int f = 0; f < N; ++f) s[f] += static_cast<double>(px[f][k]);
        continue;
      }
      const double row = static_cast<double>(k / cols), col = static_cast<double>(k % cols);
      for (int f = 0; f < N; ++f) {
        const double v = static_cast<double>(px[f][k]);
        s[f] += v, r[f] += row * v, c[f] += col * v;
      }
    }
    for (int f = 0; f < N; ++f) {
      out[f][slot] = s[f];
      if (moments) out[f][2] = r[f], out[f][3] = c[f];
    }
  };
  if (p.flags & TM_STEM_LISTS_ONLY) {
    for (int f = 0; f < N; ++f) out[f][0] = out[f][1] = out[f][2] = out[f][3] = 0.0;
  } else {
    double total[N] = {}, sum_row[N] = {}, sum_col[N] = {};
    for (uint64_t k = 0; k < n; ++k) {
      const double row = static_cast<double>(k / cols), col = static_cast<double>(k % cols);
      for (int f = 0; f < N; ++f) {
        const double v = static_cast<double>(px[f][k]);
        total[f] += v;
        sum_row[f] += row * v;
        sum_col[f] += col * v;
      }
    }
    for (int f = 0; f < N; ++f) {
      out[f][0] = total[f];
      if (p.com_list == TM_STEM_ALL_PIXELS) out[f][1] = total[f], out[f][2] = sum_row[f], out[f][3] = sum_col[f];
    }
    if (p.com_list != TM_STEM_ALL_PIXELS) list_sum(p.com_list, 1, true);
  }
  for (uint32_t j = 0; j < p.list_count; ++j) list_sum(j, TM_STEM_FRAME_SUMS_FIXED + j, false);
}

// Frames [begin, end) of a float call, four side by side, then one at a time.
template <class T>
void float_frames_sums(const T* input, const tm_stem_frame_sums_params_v1& p, uint64_t row_values, uint64_t begin, uint64_t end,
                       double* out) {
  uint64_t f = begin;
  for (; f + 4 <= end; f += 4) {
    const T* px[4];
    double* o[4];
    for (int j = 0; j < 4; ++j) px[j] = input + (f + j) * p.pixels_per_frame, o[j] = out + (f + j) * row_values;
    float_frame_sums<T, 4>(px, p, o);
  }
  for (; f < end; ++f) {
    const T* px = input + f * p.pixels_per_frame;
    double* o = out + f * row_values;
    float_frame_sums<T, 1>(&px, p, &o);
  }
}

// Per pixel, frames added in frame order; maxima as the contract says (NaN never replaces a maximum).
template <class T>
void float_pattern_reduce(const T* px, uint64_t frames, uint64_t pixels, uint64_t begin, uint64_t end, double* sums,
                          double* maxima) {
  for (uint64_t f = 0; f < frames; ++f) {
    const T* frame = px + f * pixels;
    for (uint64_t i = begin; i < end; ++i) {
      const double x = static_cast<double>(frame[i]);
      sums[i] += x;
      maxima[i] = x > maxima[i] ? x : maxima[i];
    }
  }
}

bool frame_dtype(tm_dtype d) {
  return d == TM_DTYPE_U8 || d == TM_DTYPE_U16 || d == TM_DTYPE_U32 || d == TM_DTYPE_F32 || d == TM_DTYPE_F64;
}
bool float_frames(tm_dtype d) { return d == TM_DTYPE_F32 || d == TM_DTYPE_F64; }

}  // namespace

tm_status run_stem_frame_sums(const tm_kernel_call_v1& c, std::string* error) {
  if (!c.params || c.params_size < sizeof(tm_stem_frame_sums_params_v1))
    return *error = "stem.frame_sums: params missing", TM_ERR_INVALID_ARGUMENT;
  const auto& p = *static_cast<const tm_stem_frame_sums_params_v1*>(c.params);
  if (!frame_dtype(c.dtype)) return *error = "stem.frame_sums: frames must be u8, u16, u32, f32 or f64", TM_ERR_UNSUPPORTED;
  if (p.pixels_per_frame == 0 || p.cols == 0 || p.pixels_per_frame % p.cols != 0 || c.element_count % p.pixels_per_frame != 0)
    return *error = "stem.frame_sums: element_count must be whole frames of whole rows", TM_ERR_INVALID_ARGUMENT;
  if (p.cols > 65536 || p.pixels_per_frame / p.cols > 65536)
    return *error = "stem.frame_sums: frames of more than 65,536 rows or columns", TM_ERR_INVALID_ARGUMENT;
  if (p.list_count && (!p.list_offsets || !p.list_pixels || p.list_offsets[0] != 0))
    return *error = "stem.frame_sums: pixel lists missing", TM_ERR_INVALID_ARGUMENT;
  if (p.flags & ~TM_STEM_LISTS_ONLY) return *error = "stem.frame_sums: unknown flags", TM_ERR_INVALID_ARGUMENT;
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
  if (float_frames(c.dtype)) {
    auto* out = static_cast<double*>(c.output);
    ThreadPool::shared(std::max(1u, c.threads)).parallel_for(frames, [&](uint64_t begin, uint64_t end, unsigned) {
      if (c.dtype == TM_DTYPE_F32) float_frames_sums(static_cast<const float*>(c.input), p, row_values, begin, end, out);
      else float_frames_sums(static_cast<const double*>(c.input), p, row_values, begin, end, out);
    });
    return TM_OK;
  }
  auto* out = static_cast<uint64_t*>(c.output);
  const RunLists lists = to_runs(p);
  ThreadPool::shared(std::max(1u, c.threads)).parallel_for(frames, [&](uint64_t begin, uint64_t end, unsigned) {
    std::vector<uint32_t> narrow(p.cols);
    std::vector<uint64_t> wide(c.dtype == TM_DTYPE_U32 ? p.cols : 0);
    for (uint64_t f = begin; f < end; ++f) {
      uint64_t* o = out + f * row_values;
      switch (c.dtype) {
        case TM_DTYPE_U8: frame_sums(static_cast<const uint8_t*>(c.input) + f * p.pixels_per_frame, p, lists, o, narrow); break;
        case TM_DTYPE_U16: frame_sums(static_cast<const uint16_t*>(c.input) + f * p.pixels_per_frame, p, lists, o, narrow); break;
        default: frame_sums(static_cast<const uint32_t*>(c.input) + f * p.pixels_per_frame, p, lists, o, wide); break;
      }
    }
  });
  return TM_OK;
}

tm_status run_stem_pattern_reduce(const tm_kernel_call_v1& c, std::string* error) {
  if (!c.params || c.params_size < sizeof(tm_stem_pattern_params_v1))
    return *error = "stem.pattern_reduce: params missing", TM_ERR_INVALID_ARGUMENT;
  const uint64_t pixels = static_cast<const tm_stem_pattern_params_v1*>(c.params)->pixels_per_frame;
  if (!frame_dtype(c.dtype)) return *error = "stem.pattern_reduce: frames must be u8, u16, u32, f32 or f64", TM_ERR_UNSUPPORTED;
  if (pixels == 0 || c.element_count % pixels != 0)
    return *error = "stem.pattern_reduce: element_count must be whole frames", TM_ERR_INVALID_ARGUMENT;
  const uint64_t per_pixel = float_frames(c.dtype) ? 2 * sizeof(double) : sizeof(uint64_t) + sizeof(uint32_t);
  if (c.output_size < pixels * per_pixel) return *error = "stem.pattern_reduce: output too small", TM_ERR_INVALID_ARGUMENT;
  const uint64_t frames = c.element_count / pixels;
  if (float_frames(c.dtype)) {
    auto* sums = static_cast<double*>(c.output);
    double* maxima = sums + pixels;
    ThreadPool::shared(std::max(1u, c.threads)).parallel_for((pixels + 63) / 64, [&](uint64_t begin, uint64_t end, unsigned) {
      const uint64_t b = begin * 64, e = std::min(pixels, end * 64);
      if (c.dtype == TM_DTYPE_F32) float_pattern_reduce(static_cast<const float*>(c.input), frames, pixels, b, e, sums, maxima);
      else float_pattern_reduce(static_cast<const double*>(c.input), frames, pixels, b, e, sums, maxima);
    });
    return TM_OK;
  }
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

tm_status run_stem_compact_sums(const tm_kernel_call_v1& call, std::string* error) {
  if (std::string problem = compact_sums_problem(call); !problem.empty()) {
    *error = problem;
    return TM_ERR_INVALID_ARGUMENT;
  }
  const auto& p = *static_cast<const tm_stem_compact_sums_params_v1*>(call.params);
  const auto* image = static_cast<const uint8_t*>(call.input);
  const uint64_t row_values = TM_STEM_FRAME_SUMS_FIXED + p.list_count, pixels = p.pixels_per_frame;
  const bool fixed = !(p.flags & TM_STEM_LISTS_ONLY);
  const uint64_t com_bit = p.com_list == TM_STEM_ALL_PIXELS ? 0 : uint64_t{1} << p.com_list;
  auto* out = static_cast<uint64_t*>(call.output);
  std::mutex failed;
  std::string first_problem;
  ThreadPool::shared(std::max(1u, call.threads)).parallel_for(p.position_count, [&](uint64_t begin, uint64_t end, unsigned) {
    for (uint64_t i = begin; i < end; ++i) {
      const uint64_t q = p.positions[i];
      const uint64_t page = static_cast<uint64_t>(std::upper_bound(p.page_first + 1, p.page_first + p.page_count + 1, q) - (p.page_first + 1));
      const uint8_t* base = image + page * TM_STEM_COMPACT_PAGE_BYTES;
      const uint64_t words = std::min<uint64_t>(TM_STEM_COMPACT_PAGE_BYTES, call.element_count - page * TM_STEM_COMPACT_PAGE_BYTES) / 4;
      const auto word = [&](uint64_t w) {
        uint32_t v;
        std::memcpy(&v, base + w * 4, 4);
        return v;
      };
      const auto refuse = [&](const std::string& what) {
        std::lock_guard<std::mutex> lock(failed);
        if (first_problem.empty()) first_problem = "stem.compact_sums: page " + std::to_string(page) + ": " + what;
      };
      if (words < 2) return refuse("shorter than its two count words");
      const uint64_t n = word(0), e = word(1), j = q - p.page_first[page];
      if (n != p.page_first[page + 1] - p.page_first[page])
        return refuse("holds " + std::to_string(n) + " positions, page_first says " + std::to_string(p.page_first[page + 1] - p.page_first[page]));
      const uint64_t keys_at = 3 + n, totals_at = keys_at + (p.key_bytes == 2 ? (e + 1) / 2 : e);
      if (totals_at + e > words) return refuse(std::to_string(e) + " entries do not fit the page");
      const uint64_t first = word(2 + j), last = word(3 + j);
      if (first > last || last > e) return refuse("position " + std::to_string(j) + "'s entries [" + std::to_string(first) + ", " +
                                                  std::to_string(last) + ") are not within its " + std::to_string(e));
      uint64_t total = 0, weight = 0, row = 0, col = 0;
      std::vector<uint64_t> lists(p.list_count, 0);
      const auto key_at = [&](uint64_t k) -> uint32_t {
        if (p.key_bytes == 4) return word(keys_at + k);
        uint16_t k16;
        std::memcpy(&k16, base + keys_at * 4 + k * 2, 2);
        return k16;
      };
      // Lists that are key ranges: two running totals each (contract_math.h's search); the others entry by entry.
      uint64_t by_entry = p.list_count == 64 ? ~uint64_t{0} : (uint64_t{1} << p.list_count) - 1;
      for (uint32_t l = 0; p.list_ranges && l < p.list_count; ++l) {
        const uint32_t lo = p.list_ranges[2 * l], hi = p.list_ranges[2 * l + 1];
        if (lo >= hi) continue;
        by_entry &= ~(uint64_t{1} << l);
        const auto key_in = [&](uint64_t k) { return key_at(first + k); };
        const auto total_in = [&](uint64_t k) { return word(totals_at + first + k); };
        lists[l] = compact_total_below(last - first, hi, key_in, total_in) - compact_total_below(last - first, lo, key_in, total_in);
      }
      uint32_t previous = 0;
      for (uint64_t k = first; k < last; ++k) {
        const uint32_t key = key_at(k);
        if (key >= pixels) return refuse("key " + std::to_string(key) + " of entry " + std::to_string(k) + " lies outside the frame");
        const uint32_t running = word(totals_at + k), value = running - previous;
        previous = running;
        const uint64_t member = p.list_count ? p.key_lists[key] : 0;
        total += value;
        if (fixed && (!com_bit || (member & com_bit))) {
          const uint64_t pixel = p.pixel_of_key ? p.pixel_of_key[key] : key;
          weight += value, row += uint64_t{value} * (pixel / p.cols), col += uint64_t{value} * (pixel % p.cols);
        }
        for (uint64_t bits = member & by_entry; bits; bits &= bits - 1)
          lists[static_cast<size_t>(__builtin_ctzll(bits))] += value;
      }
      uint64_t* r = out + i * row_values;
      r[0] = fixed ? total : 0, r[1] = fixed ? weight : 0, r[2] = fixed ? row : 0, r[3] = fixed ? col : 0;
      for (uint32_t l = 0; l < p.list_count; ++l) r[TM_STEM_FRAME_SUMS_FIXED + l] = lists[l];
    }
  });
  if (!first_problem.empty()) {
    *error = first_problem;
    return TM_ERR_INVALID_ARGUMENT;
  }
  return TM_OK;
}

}  // namespace tmorph::cpu
