#include "packed_kernel.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>

#include "core/thread_pool.h"
#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

namespace tmorph::cpu {

namespace {

using Params = tm_dequantize_packed_params_v1;

// Every one of the 256 codes of an 8-bit float format as float32 (exact: each value is a float).
std::array<float, 256> fp8_table(DType t) {
  std::array<float, 256> v{};
  for (int b = 0; b < 256; ++b)
    v[b] = static_cast<float>(t == DType::F8_E5M2 ? f8_e5m2_to_double(static_cast<uint8_t>(b))
                                                   : f8_e4m3fn_to_double(static_cast<uint8_t>(b)));
  return v;
}

// OCP MX E2M1 values by 4-bit code (sign in bit 3).
constexpr float kE2M1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                             -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// OCP E8M0 scale 2^(e - 127) as float32 (e = 0 is the subnormal 2^-127); e = 255 is NaN.
float e8m0(uint8_t e) {
  if (e == 255) return std::numeric_limits<float>::quiet_NaN();
  return std::bit_cast<float>(e == 0 ? uint32_t{0x00400000} : static_cast<uint32_t>(e) << 23);
}

// Each function writes logical rows [r0, r1) to out (row r0 first).

void fp8_rows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  static const std::array<float, 256> e4m3 = fp8_table(DType::F8_E4M3FN), e5m2 = fp8_table(DType::F8_E5M2);
  const float* table = p.code_dtype == TM_DTYPE_F8_E5M2 ? e5m2.data() : e4m3.data();
  const uint64_t grid_cols = (p.cols + p.block_cols - 1) / p.block_cols;
  for (uint64_t r = r0; r < r1; ++r, out += p.cols) {
    const uint8_t* in = codes + r * p.cols;
    const float* scale_row = p.scales + r / p.block_rows * grid_cols;
    for (uint64_t c0 = 0, b = 0; c0 < p.cols; c0 += p.block_cols, ++b) {
      const float s = scale_row[b];
      const uint64_t c1 = std::min(p.cols, c0 + p.block_cols);
      for (uint64_t c = c0; c < c1; ++c) out[c] = table[in[c]] * s;
    }
  }
}

void mxfp4_rows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  const uint64_t blocks = p.cols / 32;
  for (uint64_t r = r0; r < r1; ++r) {
    const uint8_t* in = codes + r * (p.cols / 2);
    const uint8_t* ex = p.exponents + r * blocks;
    for (uint64_t b = 0; b < blocks; ++b, in += 16, out += 32) {
      const float s = e8m0(ex[b]);
      for (int j = 0; j < 16; ++j) {
        out[2 * j] = kE2M1[in[j] & 0x0f] * s;
        out[2 * j + 1] = kE2M1[in[j] >> 4] * s;
      }
    }
  }
}

void bnb4_rows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  const uint64_t e1 = r1 * p.cols;
  for (uint64_t e = r0 * p.cols; e < e1;) {
    const uint64_t block = e / p.block_cols, block_end = std::min(e1, (block + 1) * p.block_cols);
    const float s = p.scales[block];
    for (; e < block_end; ++e) {
      const uint8_t byte = codes[e >> 1];
      *out++ = p.code_values[(e & 1) ? byte & 0x0f : byte >> 4] * s;
    }
  }
}

// GPTQ: output row o is column o of qweight. Rows are decoded in tiles so that each word row of qweight
// is read a cache line at a time.
void gptq_rows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  const auto* qweight = reinterpret_cast<const int32_t*>(codes);
  const uint32_t bits = p.bits, per_word = 32 / bits, mask = (1u << bits) - 1;
  const uint64_t word_rows = p.cols / per_word, zero_words = p.rows / per_word;
  constexpr uint64_t kTile = 16;
  for (uint64_t t0 = r0; t0 < r1; t0 += kTile) {
    const uint64_t t1 = std::min(r1, t0 + kTile);
    for (uint64_t k = 0; k < word_rows; ++k) {
      for (uint64_t o = t0; o < t1; ++o) {
        const auto word = static_cast<uint32_t>(qweight[k * p.rows + o]);
        float* row = out + (o - r0) * p.cols;
        for (uint32_t j = 0; j < per_word; ++j) {
          const uint64_t i = k * per_word + j;
          const auto g = static_cast<uint64_t>(p.group_index[i]);
          const auto zword = static_cast<uint32_t>(p.zeros[g * zero_words + o / per_word]);
          const int32_t z = static_cast<int32_t>((zword >> (o % per_word * bits)) & mask) + p.zero_offset;
          const int32_t q = static_cast<int32_t>((word >> (j * bits)) & mask);
          row[i] = p.scales[g * p.rows + o] * static_cast<float>(q - z);
        }
      }
    }
  }
}

// AWQ: nibble j of a word holds output column w*8 + kAwqOrder[j].
constexpr uint32_t kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

void awq_rows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  const auto* qweight = reinterpret_cast<const int32_t*>(codes);
  const uint64_t words = p.rows / 8;
  for (uint64_t w = r0 / 8; w * 8 < r1; ++w) {
    for (uint64_t i = 0; i < p.cols; ++i) {
      const uint64_t g = i / p.block_cols;
      const auto word = static_cast<uint32_t>(qweight[i * words + w]);
      const auto zword = static_cast<uint32_t>(p.zeros[g * words + w]);
      for (uint32_t j = 0; j < 8; ++j) {
        const uint64_t o = w * 8 + kAwqOrder[j];
        if (o < r0 || o >= r1) continue;
        const int32_t q = static_cast<int32_t>((word >> (4 * j)) & 0xf), z = static_cast<int32_t>((zword >> (4 * j)) & 0xf);
        out[(o - r0) * p.cols + i] = p.scales[g * p.rows + o] * static_cast<float>(q - z);
      }
    }
  }
}

using RowDecoder = void (*)(const Params&, const uint8_t*, uint64_t, uint64_t, float*);

// The decoder for p's scheme after checking the fields it relies on, or nullptr with *error set.
RowDecoder decoder_for(const Params& p, std::string* error) {
  auto fail = [&](const std::string& what) -> RowDecoder {
    *error = "dequantize.packed: " + what;
    return nullptr;
  };
  switch (p.scheme) {
    case TM_PACKED_FP8:
      if (!p.scales || !p.block_rows || !p.block_cols) return fail("FP8 needs scales and a block shape");
      if (p.code_dtype != TM_DTYPE_F8_E4M3FN && p.code_dtype != TM_DTYPE_F8_E5M2) return fail("FP8 code dtype must be e4m3fn or e5m2");
      return fp8_rows;
    case TM_PACKED_MXFP4:
      if (!p.exponents || p.cols % 32) return fail("MXFP4 needs exponents and whole 32-element blocks per row");
      return mxfp4_rows;
    case TM_PACKED_BNB4:
      if (!p.scales || !p.code_values || !p.block_cols) return fail("bitsandbytes 4-bit needs absmax, quant_map and a block size");
      return bnb4_rows;
    case TM_PACKED_GPTQ:
      if (p.bits != 2 && p.bits != 4 && p.bits != 8) return fail("GPTQ decodes 2-, 4- and 8-bit codes, not " + std::to_string(p.bits));
      if (!p.scales || !p.zeros || !p.group_index || p.cols % (32 / p.bits) || p.rows % (32 / p.bits))
        return fail("GPTQ needs scales, zeros, g_idx and whole words of codes");
      return gptq_rows;
    case TM_PACKED_AWQ:
      if (p.bits != 4 || !p.scales || !p.zeros || !p.block_cols || p.rows % 8)
        return fail("AWQ needs 4-bit codes, scales, zeros, a group size and whole words of outputs");
      return awq_rows;
    default:
      return fail("unknown scheme " + std::to_string(p.scheme));
  }
}

}  // namespace

uint64_t packed_scheme_mask() { return (uint64_t{1} << TM_PACKED_COUNT_) - 1; }

tm_status run_dequantize_packed(const tm_kernel_call_v1& c, std::string* error) {
  if (c.params_size < sizeof(Params) || !c.params) {
    *error = "dequantize.packed: params missing";
    return TM_ERR_INVALID_ARGUMENT;
  }
  const Params& p = *static_cast<const Params*>(c.params);
  const RowDecoder decode = decoder_for(p, error);
  if (!decode) return p.scheme < TM_PACKED_COUNT_ ? TM_ERR_INVALID_ARGUMENT : TM_ERR_UNSUPPORTED;
  if (!p.cols || c.element_count % p.cols || p.row_first + c.element_count / p.cols > p.rows) {
    *error = "dequantize.packed: " + std::to_string(c.element_count) + " elements are not whole rows inside the matrix";
    return TM_ERR_INVALID_ARGUMENT;
  }
  if (c.output_size < c.element_count * sizeof(float)) {
    *error = "dequantize.packed: output too small";
    return TM_ERR_INVALID_ARGUMENT;
  }
  const auto* codes = static_cast<const uint8_t*>(c.input);
  auto* dst = static_cast<float*>(c.output);
  const uint64_t rows = c.element_count / p.cols;
  // Tasks of at least 64 Ki values; AWQ tasks start on whole words of 8 output rows.
  uint64_t grain = std::max<uint64_t>(1, (uint64_t{1} << 16) / p.cols);
  if (p.scheme == TM_PACKED_AWQ) grain = (grain + 7) / 8 * 8;
  const uint64_t tasks = (rows + grain - 1) / grain;
  auto run_rows = [&](uint64_t first, uint64_t last) {
    decode(p, codes, p.row_first + first, p.row_first + last, dst + first * p.cols);
  };
  if (c.threads <= 1 || tasks <= 1) {
    run_rows(0, rows);
    return TM_OK;
  }
  ThreadPool::shared(c.threads).parallel_for(tasks, [&](uint64_t b, uint64_t e, unsigned) {
    run_rows(b * grain, std::min(rows, e * grain));
  });
  return TM_OK;
}

}  // namespace tmorph::cpu
