#include "compute/known_answer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "support/bitshuffle_lz4_decode.h"
#include "compute/op_table.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/contract_math.h"
#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph {

namespace {

// SplitMix64: the same bytes on every machine and every run.
struct Bytes {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::vector<uint8_t> fill(uint64_t n) {
    std::vector<uint8_t> out(n);
    for (uint64_t i = 0; i < n; i += 8) {
      const uint64_t v = next();
      std::memcpy(out.data() + i, &v, n - i < 8 ? n - i : 8);
    }
    return out;
  }
};

template <class P>
std::vector<uint8_t> params_bytes(const P& p) {
  std::vector<uint8_t> out(sizeof p);
  std::memcpy(out.data(), &p, sizeof p);
  return out;
}

// Random bit patterns cover every class of value (NaN, ±Inf, ±0, subnormals) of a float dtype. A few
// exact zeros and repeated values are written in as well.
std::vector<uint8_t> element_bytes(DType dtype, uint64_t n, uint64_t seed) {
  Bytes gen{seed};
  std::vector<uint8_t> out = gen.fill(n * dtype_size(dtype));
  const size_t w = dtype_size(dtype);
  for (uint64_t i = 0; i < n; i += 97) std::memset(out.data() + i * w, 0, w);
  return out;
}

// SSB's per-position sums (Σ Re, Σ Im, Σ arg, Σ arg²): Re and Im within 1e-5 of the largest magnitude, Σ arg
// within 1e-3 rad modulo 2π (a value on the negative real axis may fall on either side of the branch cut)
// at all but 1% of the positions: the parity suite's bound for every SSB kernel.
std::string compare_ssb_sums(const std::vector<uint8_t>& reference, const std::vector<uint8_t>& candidate) {
  const size_t n = reference.size() / 32;
  std::vector<double> a(4 * n), b(4 * n);
  std::memcpy(a.data(), reference.data(), 32 * n);
  std::memcpy(b.data(), candidate.data(), 32 * n);
  double scale = 0;
  for (size_t q = 0; q < n; ++q) scale = std::max({scale, std::fabs(a[4 * q]), std::fabs(a[4 * q + 1])});
  size_t outliers = 0;
  for (size_t q = 0; q < n; ++q) {
    for (int c = 0; c < 2; ++c)
      if (!(std::fabs(a[4 * q + c] - b[4 * q + c]) <= 1e-5 * scale))
        return "position " + std::to_string(q) + (c ? ": sum of Im " : ": sum of Re ") + std::to_string(b[4 * q + c]) +
               ", the CPU gives " + std::to_string(a[4 * q + c]);
    const double d = b[4 * q + 2] - a[4 * q + 2];
    outliers += !(std::fabs(d - 2 * M_PI * std::round(d / (2 * M_PI))) <= 1e-3);
  }
  if (outliers > n / 100) return std::to_string(outliers) + " of " + std::to_string(n) + " sums of arguments differ by more than 1e-3 rad";
  return {};
}

}  // namespace

tm_kernel_call_v1 KnownAnswer::call(uint32_t kernel_index, uint32_t device_index, void* output) const {
  tm_kernel_call_v1 c{};
  c.struct_size = sizeof c;
  c.op = c_.op;
  c.kernel_index = kernel_index;
  c.device_index = device_index;
  c.dtype = c_.dtype;
  c.input = c_.input.data();
  c.element_count = c_.elements;
  c.params = c_.params.empty() ? nullptr : c_.params.data();
  c.params_size = c_.params.size();
  c.output = output;
  c.output_size = c_.initial_output.size();
  c.threads = 1;
  return c;
}

std::string KnownAnswer::compare(const std::vector<uint8_t>& reference, const std::vector<uint8_t>& candidate) const {
  if (reference.size() != candidate.size()) return "output sizes differ";
  if (c_.ssb_sums) return compare_ssb_sums(reference, candidate);
  const size_t unit = c_.float32_output ? 4 : 1;
  for (size_t i = 0; i < reference.size(); i += unit) {
    if (std::memcmp(reference.data() + i, candidate.data() + i, unit) == 0) continue;
    if (c_.float32_output) {
      float a, b;
      std::memcpy(&a, reference.data() + i, 4);
      std::memcpy(&b, candidate.data() + i, 4);
      if (std::isnan(a) && std::isnan(b)) continue;
      return "value " + std::to_string(i / 4) + " is " + std::to_string(b) + ", the CPU gives " + std::to_string(a);
    }
    return "output byte " + std::to_string(i) + " of " + std::to_string(reference.size()) + " differs from the CPU's";
  }
  return {};
}

namespace known_answer_cases {

bool stats_moments(KnownAnswerCase& k, const OpRequest& req, uint64_t seed) {
  // Two canonical blocks, the second short: the block boundary and a short tail are both exercised.
  k.elements = TM_STATS_BLOCK_ELEMENTS + 4463;
  k.input = element_bytes(req.dtype, k.elements, seed);
  k.initial_output.assign(2 * sizeof(tm_moments_partial_v1), 0);
  return true;
}

bool lod_tile_stats(KnownAnswerCase& k, const OpRequest& req, uint64_t seed) {
  // A band of 5 rows x 20,000 columns in tiles of 8,192 (the last one short), under the method a pyramid asks
  // of the dtype for such a band (op_contracts.h); random patterns hold NaN, +-Inf, zeros and subnormals.
  const uint32_t dt = static_cast<uint32_t>(req.dtype);
  const uint32_t method = tile_stats_method_takes(TM_TILE_PATTERNS, dt)   ? TM_TILE_PATTERNS
                          : tile_stats_method_takes(TM_TILE_SEGMENTS, dt) ? TM_TILE_SEGMENTS
                                                                           : TM_TILE_WIDENED;
  const tm_tile_stats_params_v1 p{5, 20000, 8192, method, nullptr};
  k.elements = p.rows * p.cols;
  k.input = element_bytes(req.dtype, k.elements, seed);
  k.params = params_bytes(p);
  k.initial_output.assign(3 * sizeof(tm_tile_stats_v1), 0);
  return true;
}

bool stats_histogram(KnownAnswerCase& k, const OpRequest& req, uint64_t seed) {
  k.elements = 20000;
  k.input = element_bytes(req.dtype, k.elements, seed);
  const uint32_t bins = 40;  // edges across the range of every dtype's small values
  for (uint32_t i = 0; i <= bins; ++i) k.doubles.push_back(-200.0 + 10.0 * i + (i == 20 ? 0.5 : 0.0));
  k.params = params_bytes(tm_histogram_params_v1{bins, k.doubles.data()});
  k.initial_output.assign((bins + 2) * sizeof(uint64_t), 0);
  return true;
}

bool stats_bitpattern_histogram(KnownAnswerCase& k, const OpRequest& req, uint64_t seed) {
  if (dtype_size(req.dtype) > 2) return false;
  k.elements = 20000;
  k.input = element_bytes(req.dtype, k.elements, seed);
  k.initial_output.assign((size_t{1} << (8 * dtype_size(req.dtype))) * sizeof(uint64_t), 0);
  return true;
}

bool stats_quantiles(KnownAnswerCase& k, const OpRequest& req, uint64_t seed) {
  k.elements = 5000;
  k.input = element_bytes(req.dtype, k.elements, seed);
  k.doubles = {0.0, 0.001, 0.25, 0.5, 0.9, 1.0};
  k.params = params_bytes(tm_quantiles_params_v1{6, k.doubles.data(), 64u << 20});
  k.initial_output.assign(6 * sizeof(tm_quantile_value_v1), 0);
  return true;
}

// stem.frame_sums and stem.pattern_reduce read the same frames.
bool stem_frames(KnownAnswerCase& k, const OpRequest& req, uint64_t seed) {
  // 6 frames of 24 x 20 pixels; lists: a disk-like run set, an annulus-like one, and one empty.
  const uint64_t rows = 24, cols = 20, pixels = rows * cols, frames = 6;
  k.elements = frames * pixels;
  k.input = element_bytes(req.dtype, k.elements, seed);
  if (req.op == TM_OP_STEM_PATTERN_REDUCE) {
    k.params = params_bytes(tm_stem_pattern_params_v1{pixels});
    if (req.dtype == DType::F32 || req.dtype == DType::F64) {  // float64 sums and maxima (16 bytes a pixel), from zero
      k.initial_output.assign(pixels * 16, 0);
      return true;
    }
    k.initial_output = Bytes{seed + 1}.fill(pixels * 4);  // accumulated: start from nonzero sums
    k.initial_output.resize(pixels * 12, 0);
    return true;
  }
  k.u64s = {0};
  for (uint64_t p = 0; p < pixels; ++p)
    if (const int64_t r = static_cast<int64_t>(p / cols) - 12, c = static_cast<int64_t>(p % cols) - 10; r * r + c * c < 30)
      k.u32s.push_back(static_cast<uint32_t>(p));
  k.u64s.push_back(k.u32s.size());
  for (uint64_t p = 0; p < pixels; p += 3) k.u32s.push_back(static_cast<uint32_t>(p));
  k.u64s.push_back(k.u32s.size());
  k.u64s.push_back(k.u32s.size());
  tm_stem_frame_sums_params_v1 p{pixels, static_cast<uint32_t>(cols), 3, k.u64s.data(), k.u32s.data(), 0, 0};
  k.params = params_bytes(p);
  k.initial_output.assign(frames * (TM_STEM_FRAME_SUMS_FIXED + 3) * sizeof(uint64_t), 0);
  return true;
}

// stem.compact_sums: one page of 9 positions of 24 x 20 pixel frames (one empty), uint16 keys in increasing order with
// running totals, keys mapped to pixels by a permutation; lists: every third key, the keys below 100 (the CoM list).
bool stem_compact_sums(KnownAnswerCase& k, const OpRequest& req, uint64_t seed) {
  if (req.dtype != DType::U8) return false;
  const uint32_t rows = 24, cols = 20, pixels = rows * cols, positions = 9;
  Bytes rng{seed};
  std::vector<std::vector<uint16_t>> keys(positions);
  std::vector<std::vector<uint32_t>> totals(positions);
  uint32_t entries = 0;
  for (uint32_t q = 0; q < positions; ++q) {
    uint32_t total = 0;
    for (uint32_t key = 0; key < pixels && q != 4; ++key) {
      const uint64_t r = rng.next();
      if (r % 5 != 0) continue;
      total += static_cast<uint32_t>(1 + (r >> 8) % ((r >> 40) % 9 == 0 ? 60000 : 4));
      keys[q].push_back(static_cast<uint16_t>(key)), totals[q].push_back(total);
    }
    entries += static_cast<uint32_t>(keys[q].size());
  }
  const uint32_t keys_at = 3 + positions, totals_at = keys_at + (entries + 1) / 2;
  std::vector<uint32_t> w(totals_at + entries, 0);
  w[0] = positions, w[1] = entries;
  uint32_t at = 0;
  for (uint32_t q = 0; q < positions; ++q) {
    for (size_t e = 0; e < keys[q].size(); ++e, ++at) {
      w[keys_at + at / 2] |= uint32_t{keys[q][e]} << (16 * (at % 2));
      w[totals_at + at] = totals[q][e];
    }
    w[3 + q] = at;
  }
  k.input.resize(w.size() * 4);
  std::memcpy(k.input.data(), w.data(), k.input.size());
  k.elements = k.input.size();
  // u64s: page_first (2), then the key lists; u32s: the positions (in an order of their own), then pixel_of_key.
  k.u64s = {0, positions};
  for (uint32_t key = 0; key < pixels; ++key) k.u64s.push_back((key % 3 == 0 ? 1u : 0u) | (key < 100 ? 2u : 0u));
  k.u32s = {8, 0, 3, 4, 1, 2, 7, 6, 5, 0};
  for (uint32_t key = 0; key < pixels; ++key) k.u32s.push_back((key * 7 + 3) % pixels);  // 7 is prime to 480
  // List 1 is also a key range for its sum (its bits, keys below 100, still pick the centre-of-mass keys).
  k.u32s.insert(k.u32s.end(), {0, 0, 50, 300});
  tm_stem_compact_sums_params_v1 p{};
  p.pixels_per_frame = pixels, p.cols = cols, p.key_bytes = 2, p.page_count = 1, p.list_count = 2;
  p.page_first = k.u64s.data(), p.positions = k.u32s.data(), p.position_count = 10, p.key_lists = k.u64s.data() + 2;
  p.pixel_of_key = k.u32s.data() + 10, p.com_list = 1, p.flags = 0, p.list_ranges = k.u32s.data() + 10 + pixels;
  k.params = params_bytes(p);
  k.initial_output.assign(10 * (TM_STEM_FRAME_SUMS_FIXED + 2) * sizeof(uint64_t), 0);
  return true;
}

bool display_colorize(KnownAnswerCase& k, const OpRequest& req, uint64_t seed) {
  if (req.dtype != DType::F64) return false;
  k.elements = 3000;
  k.input = element_bytes(req.dtype, k.elements, seed);
  double* v = reinterpret_cast<double*>(k.input.data());
  for (uint64_t i = 0; i < k.elements; i += 7) v[i] = static_cast<double>(static_cast<int64_t>(i % 600) - 300) / 3;
  tm_display_colorize_params_v1 p{};
  p.key_mode = seed & 1 ? TM_DISPLAY_KEY_MAGNITUDE : TM_DISPLAY_KEY_VALUE;
  p.thresholds[0] = -INFINITY;
  for (uint32_t t = 1; t < TM_DISPLAY_THRESHOLDS; ++t) p.thresholds[t] = -100.0 + t * (200.0 / TM_DISPLAY_THRESHOLDS);
  for (uint32_t c = 0; c < 256; ++c)
    for (uint32_t j = 0; j < 4; ++j) p.table[c][j] = static_cast<uint8_t>(c * (j + 1) + 7);
  k.params = params_bytes(p);
  k.initial_output.assign(TM_DISPLAY_COLORIZE_COUNTS * 8 + k.elements * 4, 0);
  return true;
}

bool dequantize_ggml(KnownAnswerCase& k, const OpRequest& req, uint64_t seed) {
  if (!req.format_block_elements || !req.format_block_bytes) return false;
  const uint64_t blocks = 8;
  k.dtype = TM_DTYPE_F32;
  k.elements = blocks * req.format_block_elements;
  k.input = Bytes{seed}.fill(blocks * req.format_block_bytes);
  k.params = params_bytes(tm_dequantize_ggml_params_v1{req.format_id, 0});
  k.initial_output.assign(k.elements * 4, 0);
  k.float32_output = true;
  return true;
}

bool quant_moments(KnownAnswerCase& k, const OpRequest& req, uint64_t seed) {
  if (!req.format_block_elements || !req.format_block_bytes) return false;
  // Two canonical blocks, the second short; random codes and fp16 scales of every class (NaN, Inf, subnormal).
  const uint64_t blocks = TM_STATS_BLOCK_ELEMENTS / req.format_block_elements + 37;
  k.dtype = TM_DTYPE_F32;
  k.elements = blocks * req.format_block_elements;
  k.input = Bytes{seed}.fill(blocks * req.format_block_bytes);
  k.params = params_bytes(tm_dequantize_ggml_params_v1{req.format_id, 0});
  k.initial_output.assign(2 * sizeof(tm_moments_partial_v1), 0);
  return true;
}

bool decode_bitshuffle_lz4(KnownAnswerCase& k, const OpRequest& req, uint64_t seed) {
  // Three chunks of 1,003 elements (a 3-element raw tail) in blocks of 64 elements (15 whole, one of 40).
  const uint64_t chunks = 3, per_chunk = 1003;
  const uint32_t width = static_cast<uint32_t>(dtype_size(req.dtype));
  Bytes gen{seed};
  k.u64s = {0};
  for (uint64_t c = 0; c < chunks; ++c) {
    const auto chunk = bitshuffle_lz4_chunk_without_compressor(per_chunk, width, 64, gen.fill(4096));
    k.input.insert(k.input.end(), chunk.begin(), chunk.end());
    k.u64s.push_back(k.input.size());
  }
  k.elements = chunks * per_chunk;
  k.params = params_bytes(decode_params(chunks, per_chunk, k.u64s.data()));
  k.initial_output.assign(k.elements * width, 0);
  return true;
}

bool stem_ssb_overlap(KnownAnswerCase& k, const OpRequest& req, uint64_t seed) {
  // 9 bright-field pixels over a 12 x 10 scan; the variant is the request's format.
  constexpr uint64_t R = 12, C = 10, N = R * C, B = 9, stride = R * (C / 2 + 1);
  const bool quadratic = req.format_id == TM_SSB_QUADRATIC;
  Bytes gen{seed};
  auto unit = [&] { return static_cast<double>(gen.next() >> 11) * 0x1p-53 * 2 - 1; };  // [-1, 1)
  k.dtype = TM_DTYPE_F32;
  k.elements = 2 * B * stride;
  std::vector<float> spectra(k.elements);
  for (float& v : spectra) v = static_cast<float>(unit());
  k.input.resize(spectra.size() * 4);
  std::memcpy(k.input.data(), spectra.data(), k.input.size());
  // doubles_: pixel_k (2B), dc (B), nu (2N), e_chi (2N), row factors (2BR), column factors (2BC).
  auto& d = k.doubles;
  for (uint64_t b = 0; b < B; ++b) d.push_back(0.8 * unit()), d.push_back(0.8 * unit());
  for (uint64_t b = 0; b < B; ++b) d.push_back(40 + 10 * unit());
  for (uint64_t q = 0; q < N; ++q) d.push_back((static_cast<double>(q / C) - R / 2.0) / R), d.push_back((static_cast<double>(q % C) - C / 2.0) / C);
  for (uint64_t q = 0; q < N; ++q) d.push_back(std::cos(3 * unit())), d.push_back(std::sin(2 * unit()));
  for (uint64_t i = 0; i < B * (R + C); ++i) d.push_back(std::cos(0.3 * static_cast<double>(i))), d.push_back(std::sin(0.3 * static_cast<double>(i)));
  k.chi_terms = {{3.0, 2, 0, 0}, {1.5, 2, 2, 0.3}, {0.8, 4, 0, 0}};
  const double* at = d.data();
  tm_stem_ssb_params_v1 p{};
  p.variant = quadratic ? TM_SSB_QUADRATIC : TM_SSB_DIRECT, p.rows = R, p.cols = C, p.pixels = B, p.slice_stride = stride;
  p.kmax2 = 1.0, p.pixel_k = at, p.dc = at + 2 * B, p.nu = at + 3 * B;
  if (quadratic) p.e_chi = at + 3 * B + 2 * N, p.row_factor = at + 3 * B + 4 * N, p.col_factor = p.row_factor + 2 * B * R;
  else p.chi_term_count = 3, p.chi_terms = k.chi_terms.data();
  k.params = params_bytes(p);
  k.initial_output.assign(N * 32, 0);
  k.ssb_sums = true;
  return true;
}

}  // namespace known_answer_cases

std::unique_ptr<KnownAnswer> make_known_answer(const OpRequest& req) {
  const OpDescriptor* row = find_op(req.op);
  if (!row || !row->known_answer) return nullptr;  // no case for this op yet: its kernels are listed as not self-tested
  auto k = std::make_unique<KnownAnswer>();
  k->c_.op = req.op;
  k->c_.dtype = static_cast<tm_dtype>(req.dtype);
  const uint64_t seed = (static_cast<uint64_t>(req.op) << 32) ^ (tm_op_takes_format(req.op) ? req.format_id : static_cast<uint32_t>(req.dtype));
  if (!row->known_answer(k->c_, req, seed)) return nullptr;
  const std::string on = " on " + std::string(req.format_name.empty() ? dtype_name(req.dtype) : req.format_name);
  k->description_ = std::string(row->name) + on + " (" + std::to_string(k->c_.elements) + " elements)";
  return k;
}

}  // namespace tmorph
