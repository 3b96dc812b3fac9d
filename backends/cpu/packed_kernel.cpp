// TM_OP_DEQUANTIZE_PACKED on the CPU: FP8 with a scale grid, gpt-oss MXFP4, bitsandbytes NF4/FP4, GPTQ and
// AWQ, decoded to float32.
//
// Every value is one float32 product of a code value and a scale (GPTQ/AWQ: the scale times the integer
// q - z converted to float), so each target computes exactly the scalar code's values with the same
// multiplication operands, in the same order (the project builds with -ffp-contract=off). Highway, dynamic
// dispatch (this file is compiled once per target); the HWY_SCALAR target runs the scalar decoders below,
// which also finish the ragged ends of the vector loops:
//   FP8    builds each code's float32 bits with integer operations (normal codes by shifting the exponent
//          and mantissa into place, subnormals as an exact int -> float conversion times a power of two,
//          NaN/Inf from the format's table) and multiplies a block row segment by its scale.
//   MXFP4, BNB4  split 16 code bytes into 32 nibbles in element order, widen them to int32 and look their
//          float values up in the scheme's 16-entry table (TableLookupLanes on 16/8/4 float lanes).
//   GPTQ   output row o is column o of qweight: tiles of 128 output rows are transposed 32 qweight rows
//          at a time into a small buffer (each qweight row read 512 contiguous bytes at a time), then per
//          output row each word is spread over its lanes, the codes shifted and masked out, the zero
//          subtracted (a broadcast when a vector's columns share one group, else a gather from the row's
//          unpacked zeros and scales: act-order g_idx) and the scale applied.
//          3-bit codes (crossing words): 96 qweight rows at a time, each lane's code from its word of the
//          triple and, for the two split codes, the next word.
//   AWQ    transposes blocks of 32 word columns x 128 inputs so that each output row reads its words
//          contiguously, then per output row and group shifts one nibble out of every word.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "packed_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "support/thread_pool.h"
#include "packed_kernel.h"
#include "tensormorph/dtype.h"
#include "tensormorph/op_contracts.h"

#ifndef TM_PACKED_KERNEL_SHARED
#define TM_PACKED_KERNEL_SHARED
namespace tmorph::cpu::packed_detail {

using Params = tm_dequantize_packed_params_v1;

// Parts of int32 words are read byte-wise: a part need not sit on a 4-byte boundary of its file.
inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint32_t word_at(const int32_t* words, uint64_t index) {
  return load_u32(reinterpret_cast<const uint8_t*>(words) + 4 * index);
}

// Every one of the 256 codes of an 8-bit float format as float32 (exact: each value is a float).
inline std::array<float, 256> fp8_table(DType t) {
  std::array<float, 256> v{};
  for (int b = 0; b < 256; ++b)
    v[b] = static_cast<float>(t == DType::F8_E5M2 ? f8_e5m2_to_double(static_cast<uint8_t>(b))
                                                   : f8_e4m3fn_to_double(static_cast<uint8_t>(b)));
  return v;
}
inline const float* fp8_values(uint32_t code_dtype) {
  static const std::array<float, 256> e4m3 = fp8_table(DType::F8_E4M3FN), e5m2 = fp8_table(DType::F8_E5M2);
  return code_dtype == TM_DTYPE_F8_E5M2 ? e5m2.data() : e4m3.data();
}

// OCP MX E2M1 values by 4-bit code (sign in bit 3).
alignas(64) constexpr float kE2M1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                         -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// OCP E8M0 scale 2^(e - 127) as float32 (e = 0 is the subnormal 2^-127); e = 255 is NaN.
inline float e8m0(uint8_t e) {
  if (e == 255) return std::numeric_limits<float>::quiet_NaN();
  return std::bit_cast<float>(e == 0 ? uint32_t{0x00400000} : static_cast<uint32_t>(e) << 23);
}

// AWQ: nibble j of a word holds output column w*8 + kAwqOrder[j].
constexpr uint32_t kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// ---- Scalar decoders (the HWY_SCALAR target; the ragged ends of the vector loops) ---------------------
// Each writes logical rows [r0, r1) to out (row r0 first).

// FP8 row r, columns [c0, c1) (inside one scale block), to row_out (the row's first value).
inline void fp8_segment(const float* table, const uint8_t* in, float s, uint64_t c0, uint64_t c1, float* row_out) {
  for (uint64_t c = c0; c < c1; ++c) row_out[c] = table[in[c]] * s;
}

inline void fp8_rows_scalar(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  const float* table = fp8_values(p.code_dtype);
  const uint64_t grid_cols = (p.cols + p.block_cols - 1) / p.block_cols;
  for (uint64_t r = r0; r < r1; ++r, out += p.cols) {
    const uint8_t* in = codes + r * p.cols;
    const float* scale_row = p.scales + r / p.block_rows * grid_cols;
    for (uint64_t c0 = 0, b = 0; c0 < p.cols; c0 += p.block_cols, ++b)
      fp8_segment(table, in, scale_row[b], c0, std::min(p.cols, c0 + p.block_cols), out);
  }
}

inline void mxfp4_rows_scalar(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
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

// BNB4 elements [e0, e1) of the flattened matrix, all under scale s, to out (element e0's value).
inline void bnb4_elements(const Params& p, const uint8_t* codes, float s, uint64_t e0, uint64_t e1, float* out) {
  for (uint64_t e = e0; e < e1; ++e) {
    const uint8_t byte = codes[e >> 1];
    *out++ = p.code_values[(e & 1) ? byte & 0x0f : byte >> 4] * s;
  }
}

inline void bnb4_rows_scalar(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  const uint64_t e1 = r1 * p.cols;
  for (uint64_t e = r0 * p.cols; e < e1;) {
    const uint64_t block = e / p.block_cols, block_end = std::min(e1, (block + 1) * p.block_cols);
    bnb4_elements(p, codes, p.scales[block], e, block_end, out);
    out += block_end - e;
    e = block_end;
  }
}

// GPTQ: output row o is column o of qweight. Rows are decoded in tiles so that each word row of qweight
// is read a cache line at a time.
constexpr uint64_t kGptqTile = 16;

inline void gptq_rows_scalar(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  const auto* qweight = reinterpret_cast<const int32_t*>(codes);
  const uint32_t bits = p.bits, per_word = 32 / bits, mask = (1u << bits) - 1;
  const uint64_t word_rows = p.cols / per_word, zero_words = p.rows / per_word;
  for (uint64_t t0 = r0; t0 < r1; t0 += kGptqTile) {
    const uint64_t t1 = std::min(r1, t0 + kGptqTile);
    for (uint64_t k = 0; k < word_rows; ++k) {
      for (uint64_t o = t0; o < t1; ++o) {
        const uint32_t word = word_at(qweight, k * p.rows + o);
        float* row = out + (o - r0) * p.cols;
        for (uint32_t j = 0; j < per_word; ++j) {
          const uint64_t i = k * per_word + j;
          const auto g = static_cast<uint64_t>(p.group_index[i]);
          const uint32_t zword = word_at(p.zeros, g * zero_words + o / per_word);
          const int32_t z = static_cast<int32_t>((zword >> (o % per_word * bits)) & mask) + p.zero_offset;
          const int32_t q = static_cast<int32_t>((word >> (j * bits)) & mask);
          row[i] = p.scales[g * p.rows + o] * static_cast<float>(q - z);
        }
      }
    }
  }
}

// GPTQ 3-bit: codes cross word boundaries (op_contracts.h); code by code with tm_gptq_field, a tile of
// outputs at a time as gptq_rows_scalar.
inline void gptq3_rows_scalar(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  const auto* qweight = reinterpret_cast<const int32_t*>(codes);
  const uint64_t zero_words = p.rows * 3 / 32;
  for (uint64_t t0 = r0; t0 < r1; t0 += kGptqTile) {
    const uint64_t t1 = std::min(r1, t0 + kGptqTile);
    for (uint64_t i0 = 0; i0 < p.cols; i0 += 32)
      for (uint64_t o = t0; o < t1; ++o) {
        float* row = out + (o - r0) * p.cols;
        for (uint64_t i = i0; i < i0 + 32; ++i) {
          const auto g = static_cast<uint64_t>(p.group_index[i]);
          const auto z = static_cast<int32_t>(tm_gptq_field(p.zeros + g * zero_words, 1, o, 3)) + p.zero_offset;
          const auto q = static_cast<int32_t>(tm_gptq_field(qweight + o, p.rows, i, 3));
          row[i] = p.scales[g * p.rows + o] * static_cast<float>(q - z);
        }
      }
  }
}
inline void awq_rows_scalar(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  const auto* qweight = reinterpret_cast<const int32_t*>(codes);
  const uint64_t words = p.rows / 8;
  for (uint64_t w = r0 / 8; w * 8 < r1; ++w) {
    for (uint64_t i = 0; i < p.cols; ++i) {
      const uint64_t g = i / p.block_cols;
      const uint32_t word = word_at(qweight, i * words + w);
      const uint32_t zword = word_at(p.zeros, g * words + w);
      for (uint32_t j = 0; j < 8; ++j) {
        const uint64_t o = w * 8 + kAwqOrder[j];
        if (o < r0 || o >= r1) continue;
        const int32_t q = static_cast<int32_t>((word >> (4 * j)) & 0xf), z = static_cast<int32_t>((zword >> (4 * j)) & 0xf);
        out[(o - r0) * p.cols + i] = p.scales[g * p.rows + o] * static_cast<float>(q - z);
      }
    }
  }
}

}  // namespace tmorph::cpu::packed_detail
#endif  // TM_PACKED_KERNEL_SHARED

HWY_BEFORE_NAMESPACE();
namespace tmorph::cpu::packed_detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR

// The float lanes the decoders use: at most 16 (a nibble decoder's 16 code bytes fill them).
using DF = hn::CappedTag<float, 16>;

// Whether DF's lanes are a power of two, at least 4 and known at compile time (the decoders rely on it;
// every x86 and NEON target qualifies). Elsewhere the scalar decoders run.
HWY_INLINE bool LanesUsable() {
  const DF df;
  const size_t n = hn::Lanes(df);
  return n >= 4 && (n & (n - 1)) == 0 && n == hn::MaxLanes(df);
}

// table[idx] for int32 lanes 0 <= idx < 16: one lookup when a vector holds all 16 floats, else one per
// slice of the table, each kept where idx falls in its slice.
template <class D>
HWY_INLINE hn::Vec<D> Lookup16(D df, const float* HWY_RESTRICT table, hn::Vec<hn::RebindToSigned<D>> idx) {
  const hn::RebindToSigned<D> di;
  constexpr size_t kN = hn::MaxLanes(D());
  if constexpr (kN >= 16) {
    return hn::TableLookupLanes(hn::LoadU(df, table), hn::IndicesFromVec(df, idx));
  } else {
    const auto lane = hn::IndicesFromVec(df, hn::And(idx, hn::Set(di, static_cast<int32_t>(kN - 1))));
    auto v = hn::TableLookupLanes(hn::LoadU(df, table), lane);
    for (size_t t = kN; t < 16; t += kN)
      v = hn::IfThenElse(hn::RebindMask(df, hn::Gt(idx, hn::Set(di, static_cast<int32_t>(t - 1)))),
                         hn::TableLookupLanes(hn::LoadU(df, table + t), lane), v);
    return v;
  }
}

// out[i] = table[codes[i]] * s for the lanes of the byte vector codes (each < 16): one float vector when
// the target holds that many float lanes, else its halves in turn.
template <class D8>
HWY_INLINE void StoreLookedUp(D8 d8, hn::Vec<D8> codes, const float* HWY_RESTRICT table, float s, float* HWY_RESTRICT out) {
  constexpr size_t kLanes = hn::MaxLanes(D8());
  if constexpr (kLanes * sizeof(float) <= HWY_MAX_BYTES) {
    const hn::Rebind<int32_t, D8> di;
    const hn::Rebind<float, D8> df;
    hn::StoreU(hn::Mul(Lookup16(df, table, hn::PromoteTo(di, codes)), hn::Set(df, s)), df, out);
  } else {
    const hn::Half<D8> dh;
    StoreLookedUp(dh, hn::LowerHalf(dh, codes), table, s, out);
    StoreLookedUp(dh, hn::UpperHalf(dh, codes), table, s, out + kLanes / 2);
  }
  (void)d8;
}

// 16 bytes of nibble codes -> 32 values, element 2j from byte j's low nibble when kLowFirst (MXFP4), its
// high nibble otherwise (bitsandbytes); each table[code] * s.
template <bool kLowFirst>
HWY_INLINE void DecodeNibbles32(const uint8_t* HWY_RESTRICT bytes, const float* HWY_RESTRICT table, float s,
                                float* HWY_RESTRICT out) {
  const hn::Full128<uint8_t> d8;
  const auto v = hn::LoadU(d8, bytes);
  const auto low = hn::And(v, hn::Set(d8, uint8_t{0x0f})), high = hn::ShiftRight<4>(v);
  const auto first = kLowFirst ? low : high, second = kLowFirst ? high : low;
  StoreLookedUp(d8, hn::InterleaveLower(first, second), table, s, out);
  StoreLookedUp(d8, hn::InterleaveUpper(d8, first, second), table, s, out + 16);
}

// The float32 values of FP8 codes (uint32 lanes 0..255). Normal codes: the exponent and mantissa bits
// shifted into place plus the exponent bias difference; subnormals: mantissa * 2^(1 - bias - mantissa bits),
// exact; the codes from first_special up: special (e4m3fn's NaN), or for e5m2 +Inf then NaN; the sign
// bit last. The magnitudes of the specials come from the format's table, so every code gives the table's
// bits (the unit test checks all 256).
template <bool kE5M2, class D>
HWY_INLINE hn::Vec<D> Fp8Values(D df, hn::Vec<hn::RebindToUnsigned<D>> b, const float* HWY_RESTRICT table) {
  const hn::RebindToUnsigned<D> du;
  const hn::RebindToSigned<D> di;
  constexpr int kMantissa = kE5M2 ? 2 : 3, kBias = kE5M2 ? 15 : 7;
  constexpr uint32_t kFirstSpecial = kE5M2 ? 0x7c : 0x7f;
  const auto m7 = hn::And(b, hn::Set(du, 0x7fu));
  const auto m7i = hn::BitCast(di, m7);
  auto mag = hn::Add(hn::ShiftLeft<23 - kMantissa>(m7), hn::Set(du, uint32_t{127 - kBias} << 23));
  const auto subnormal = hn::ConvertTo(df, m7i);
  constexpr float kSubnormalUnit = std::bit_cast<float>(static_cast<uint32_t>(127 + 1 - kBias - kMantissa) << 23);
  mag = hn::IfThenElse(hn::RebindMask(du, hn::Lt(m7i, hn::Set(di, 1 << kMantissa))),
                       hn::BitCast(du, hn::Mul(subnormal, hn::Set(df, kSubnormalUnit))), mag);
  const auto first_special = hn::Set(du, std::bit_cast<uint32_t>(table[kFirstSpecial]));
  if constexpr (kE5M2) {
    mag = hn::IfThenElse(hn::RebindMask(du, hn::Gt(m7i, hn::Set(di, static_cast<int32_t>(kFirstSpecial)))),
                         hn::Set(du, std::bit_cast<uint32_t>(table[kFirstSpecial + 1])), mag);
  }
  mag = hn::IfThenElse(hn::RebindMask(du, hn::Eq(m7i, hn::Set(di, static_cast<int32_t>(kFirstSpecial)))), first_special, mag);
  return hn::BitCast(df, hn::Or(mag, hn::ShiftLeft<24>(hn::And(b, hn::Set(du, 0x80u)))));
}

template <bool kE5M2>
void Fp8RowsT(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  const DF df;
  const hn::RebindToUnsigned<DF> du;
  const hn::Rebind<uint8_t, DF> d8;
  const size_t n = hn::Lanes(df);
  const float* table = fp8_values(p.code_dtype);
  const uint64_t grid_cols = (p.cols + p.block_cols - 1) / p.block_cols;
  for (uint64_t r = r0; r < r1; ++r, out += p.cols) {
    const uint8_t* in = codes + r * p.cols;
    const float* scale_row = p.scales + r / p.block_rows * grid_cols;
    for (uint64_t c0 = 0, b = 0; c0 < p.cols; c0 += p.block_cols, ++b) {
      const float s = scale_row[b];
      const uint64_t c1 = std::min(p.cols, c0 + p.block_cols);
      const auto vs = hn::Set(df, s);
      uint64_t c = c0;
      for (; c + n <= c1; c += n)
        hn::StoreU(hn::Mul(Fp8Values<kE5M2>(df, hn::PromoteTo(du, hn::LoadU(d8, in + c)), table), vs), df, out + c);
      fp8_segment(table, in, s, c, c1, out);
    }
  }
}

#endif  // HWY_TARGET != HWY_SCALAR

void Fp8Rows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
#if HWY_TARGET != HWY_SCALAR
  if (LanesUsable()) {
    if (p.code_dtype == TM_DTYPE_F8_E5M2) return Fp8RowsT<true>(p, codes, r0, r1, out);
    return Fp8RowsT<false>(p, codes, r0, r1, out);
  }
#endif
  fp8_rows_scalar(p, codes, r0, r1, out);
}

void Mxfp4Rows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
#if HWY_TARGET != HWY_SCALAR
  if (LanesUsable()) {
    const uint64_t blocks = p.cols / 32;
    for (uint64_t r = r0; r < r1; ++r) {
      const uint8_t* in = codes + r * (p.cols / 2);
      const uint8_t* ex = p.exponents + r * blocks;
      for (uint64_t b = 0; b < blocks; ++b, in += 16, out += 32) DecodeNibbles32<true>(in, kE2M1, e8m0(ex[b]), out);
    }
    return;
  }
#endif
  mxfp4_rows_scalar(p, codes, r0, r1, out);
}

void Bnb4Rows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
#if HWY_TARGET != HWY_SCALAR
  if (LanesUsable()) {
    alignas(64) float table[16];
    std::memcpy(table, p.code_values, sizeof table);
    const uint64_t e1 = r1 * p.cols;
    for (uint64_t e = r0 * p.cols; e < e1;) {
      const uint64_t block = e / p.block_cols, block_end = std::min(e1, (block + 1) * p.block_cols);
      const float s = p.scales[block];
      if (e & 1) {  // an odd first element: the low nibble of its byte
        bnb4_elements(p, codes, s, e, e + 1, out++);
        ++e;
      }
      for (; e + 32 <= block_end; e += 32, out += 32) DecodeNibbles32<false>(codes + e / 2, table, s, out);
      bnb4_elements(p, codes, s, e, block_end, out);
      out += block_end - e;
      e = block_end;
    }
    return;
  }
#endif
  bnb4_rows_scalar(p, codes, r0, r1, out);
}

// GPTQ, 2, 3, 4 or 8 bits. 3-bit codes cross words: each 32 codes of a column take 3 consecutive words
// (96 bits, code i at bits 3i..3i+2, codes 10 and 21 split over two words), so a vector of columns inside
// one such triple takes its lanes' low parts from one word and the high parts of the two split codes from
// the next (per-lane tables below), a shift each.
void GptqRows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
#if HWY_TARGET != HWY_SCALAR
  if (LanesUsable()) {
    const DF df;
    const hn::RebindToSigned<DF> di;
    const hn::RebindToUnsigned<DF> du;
    const size_t n = hn::Lanes(df);
    const bool three = p.bits == 3;
    const uint32_t bits = p.bits, per_word = three ? 32 : 32 / bits, mask = (1u << bits) - 1;
    // per_word for 3 bits: 32 codes per 3 words (a "word" below is then a triple, word_span words).
    const uint64_t word_span = three ? 3 : 1;
    const uint64_t cols = p.cols, word_rows = cols / per_word * word_span, zero_words = three ? p.rows * 3 / 32 : p.rows / per_word;
    // The group of each whole vector of columns, or -1 where its columns span several (act-order g_idx).
    uint64_t groups = 1;
    std::vector<int32_t> vector_group(cols / n);
    for (uint64_t v = 0; v < cols / n; ++v) {
      const int32_t* g = p.group_index + v * n;
      vector_group[v] = std::all_of(g + 1, g + n, [&](int32_t x) { return x == g[0]; }) ? g[0] : -1;
    }
    for (uint64_t i = 0; i < cols; ++i) groups = std::max(groups, static_cast<uint64_t>(p.group_index[i]) + 1);
    // A tile of kRows output rows is decoded kWords qweight rows at a time (96 for 3 bits: whole triples):
    // their words transposed into words[o - t0][k - k0] (each qweight row read kRows words = whole cache
    // lines at a time; rows of the buffer an odd number of cache lines apart so that one qweight row's words
    // land in different cache sets; n words more that loads past the last one may read), then each output
    // row's columns [k0 / word_span * per_word, k1 / word_span * per_word). The tile's scales and zeros
    // (zero_offset added), by row and group.
    constexpr uint64_t kRows = 128;
    const uint64_t kWords = three ? 96 : 32, kStride = kWords + 16;  // 112 or 48 words: 7 or 3 cache lines
    std::vector<uint32_t> words(kRows * kStride + n);
    std::vector<float> scales(kRows * groups);
    std::vector<int32_t> zeros(kRows * groups);
    // Lane l of a vector starting at column c (a multiple of n) takes word c / per_word + l / per_word
    // when a vector spans whole words, else word c / per_word; its code is at bits ((c + l) % per_word) * bits.
    const bool whole_words = n >= per_word && !three;
    const auto lane = hn::Iota(du, 0);
    const auto word_of_lane = hn::IndicesFromVec(du, hn::ShiftRightSame(lane, std::countr_zero(per_word)));
    const int log2_bits = three ? 0 : std::countr_zero(bits), log2_per_word = std::countr_zero(per_word);
    // Lanes of whole words: (l % per_word) * bits; a vector inside one word: l * bits (plus its offset).
    const auto lane_shift = hn::ShiftLeftSame(whole_words ? hn::And(lane, hn::Set(du, per_word - 1)) : lane, log2_bits);
    const auto vmask = hn::Set(du, mask);
    // 3 bits, code i of a triple: word i * 3 / 32 shifted right by i * 3 % 32, or-ed (codes 10 and 21) with
    // the next word shifted left by 32 - that.
    alignas(64) uint32_t lo_word[32], lo_shift[32], hi_word[32], hi_shift[32], hi_mask[32];
    for (uint32_t i = 0; i < 32; ++i) {
      const uint32_t bit = 3 * i, split = bit % 32 > 29;
      lo_word[i] = bit / 32, lo_shift[i] = bit % 32;
      hi_word[i] = bit / 32 + split, hi_shift[i] = split ? 32 - bit % 32 : 0, hi_mask[i] = split ? mask : 0;
    }
    const auto* qweight = reinterpret_cast<const int32_t*>(codes);
    for (uint64_t t0 = r0; t0 < r1; t0 += kRows) {
      const uint64_t t1 = std::min(r1, t0 + kRows);
      for (uint64_t o = t0; o < t1; ++o) {
        for (uint64_t g = 0; g < groups; ++g) {
          const uint32_t z = three ? tm_gptq_field(p.zeros + g * zero_words, 1, o, 3)
                                   : (word_at(p.zeros, g * zero_words + o / per_word) >> (o % per_word * bits)) & mask;
          scales[(o - t0) * groups + g] = p.scales[g * p.rows + o];
          zeros[(o - t0) * groups + g] = static_cast<int32_t>(z) + p.zero_offset;
        }
      }
      for (uint64_t k0 = 0; k0 < word_rows; k0 += kWords) {
        const uint64_t k1 = std::min(word_rows, k0 + kWords);
        for (uint64_t k = k0; k < k1; ++k) {
          // qweight rows are far apart: fetch a few ahead of the transposition.
          if (k + 8 < word_rows) hwy::Prefetch(codes + 4 * ((k + 8) * p.rows + t0));
          for (uint64_t o = t0; o < t1; ++o) words[(o - t0) * kStride + (k - k0)] = word_at(qweight, k * p.rows + o);
        }
        // c0: a multiple of kWords / word_span * per_word (1,024 for 3 bits), so of n
        const uint64_t c0 = k0 / word_span * per_word, c1 = k1 / word_span * per_word;
        for (uint64_t o = t0; o < t1; ++o) {
          const uint32_t* wrow = words.data() + (o - t0) * kStride;  // column c's word (triple): wrow[(c - c0) / per_word * word_span]
          const float* srow = scales.data() + (o - t0) * groups;
          const int32_t* zrow = zeros.data() + (o - t0) * groups;
          float* row = out + (o - r0) * cols;
          // Column c's value from its code q (int32 lanes): the scale times q minus the zero.
          const auto store = [&](uint64_t c, hn::Vec<decltype(di)> q) {
            const int32_t g = vector_group[c / n];
            const auto gi = hn::LoadU(di, p.group_index + c);
            const auto s = g >= 0 ? hn::Set(df, srow[g]) : hn::GatherIndex(df, srow, gi);
            const auto z = g >= 0 ? hn::Set(di, zrow[g]) : hn::GatherIndex(di, zrow, gi);
            hn::StoreU(hn::Mul(s, hn::ConvertTo(df, hn::Sub(q, z))), df, row + c);
          };
          uint64_t c = c0;
          if (three) {  // cols % 32 == 0 and n divides 32: whole vectors inside triples
            for (; c + n <= c1; c += n) {
              const uint64_t i = c % 32;
              const auto w = hn::LoadU(du, wrow + (c - c0) / 32 * 3);
              const auto lo = hn::Shr(hn::TableLookupLanes(w, hn::IndicesFromVec(du, hn::Load(du, lo_word + i))), hn::Load(du, lo_shift + i));
              const auto hi = hn::And(hn::Shl(hn::TableLookupLanes(w, hn::IndicesFromVec(du, hn::Load(du, hi_word + i))), hn::Load(du, hi_shift + i)),
                                      hn::Load(du, hi_mask + i));
              store(c, hn::BitCast(di, hn::And(hn::Or(lo, hi), vmask)));
            }
            continue;
          }
          for (; c + n <= c1; c += n) {
            const uint64_t k = (c - c0) >> log2_per_word;
            const auto w = whole_words ? hn::TableLookupLanes(hn::LoadU(du, wrow + k), word_of_lane) : hn::Set(du, wrow[k]);
            const auto shift =
                whole_words ? lane_shift : hn::Add(lane_shift, hn::Set(du, static_cast<uint32_t>((c & (per_word - 1)) << log2_bits)));
            store(c, hn::BitCast(di, hn::And(hn::Shr(w, shift), vmask)));
          }
          for (; c < c1; ++c) {
            const int32_t g = p.group_index[c];
            const int32_t q = static_cast<int32_t>((wrow[(c - c0) / per_word] >> (c % per_word * bits)) & mask);
            row[c] = srow[g] * static_cast<float>(q - zrow[g]);
          }
        }
      }
    }
    return;
  }
#endif
  if (p.bits == 3) gptq3_rows_scalar(p, codes, r0, r1, out);
  else gptq_rows_scalar(p, codes, r0, r1, out);
}

void AwqRows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
#if HWY_TARGET != HWY_SCALAR
  if (LanesUsable()) {
    const DF df;
    const hn::RebindToSigned<DF> di;
    const hn::RebindToUnsigned<DF> du;
    const size_t n = hn::Lanes(df);
    const uint64_t cols = p.cols, words = p.rows / 8;
    const auto* qweight = reinterpret_cast<const int32_t*>(codes);
    // Blocks of kWords word columns x kInputs inputs, transposed: block[w][i] = word (i, w), rows kStride
    // words (an odd number of cache lines) apart so that one input's words land in different cache sets.
    constexpr uint64_t kWords = 32, kInputs = 128, kStride = kInputs + 16;
    static_assert(kStride % 16 == 0 && kStride / 16 % 2 == 1);
    alignas(64) uint32_t block[kWords * kStride];
    const uint64_t w_end = (r1 + 7) / 8;
    for (uint64_t w0 = r0 / 8; w0 < w_end; w0 += kWords) {
      const uint64_t w1 = std::min(w_end, w0 + kWords);
      for (uint64_t i0 = 0; i0 < cols; i0 += kInputs) {
        const uint64_t i1 = std::min(cols, i0 + kInputs);
        for (uint64_t i = i0; i < i1; ++i)
          for (uint64_t w = w0; w < w1; ++w) block[(w - w0) * kStride + (i - i0)] = word_at(qweight, i * words + w);
        for (uint64_t w = w0; w < w1; ++w) {
          const uint32_t* wrow = block + (w - w0) * kStride;  // wrow[i - i0]: word (i, w)
          for (uint32_t j = 0; j < 8; ++j) {
            const uint64_t o = w * 8 + kAwqOrder[j];
            if (o < r0 || o >= r1) continue;
            float* row = out + (o - r0) * cols;
            for (uint64_t i = i0; i < i1;) {
              const uint64_t g = i / p.block_cols, end = std::min(i1, (g + 1) * p.block_cols);
              const float s = p.scales[g * p.rows + o];
              const auto z = static_cast<int32_t>((word_at(p.zeros, g * words + w) >> (4 * j)) & 0xf);
              const auto vs = hn::Set(df, s);
              const auto vz = hn::Set(di, z);
              for (; i + n <= end; i += n) {
                const auto q = hn::BitCast(di, hn::And(hn::ShiftRightSame(hn::LoadU(du, wrow + (i - i0)), static_cast<int>(4 * j)),
                                                        hn::Set(du, 0xfu)));
                hn::StoreU(hn::Mul(vs, hn::ConvertTo(df, hn::Sub(q, vz))), df, row + i);
              }
              for (; i < end; ++i)
                row[i] = s * static_cast<float>(static_cast<int32_t>((wrow[i - i0] >> (4 * j)) & 0xf) - z);
            }
          }
        }
      }
    }
    return;
  }
#endif
  awq_rows_scalar(p, codes, r0, r1, out);
}

}  // namespace HWY_NAMESPACE
}  // namespace tmorph::cpu::packed_detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph::cpu {
namespace packed_detail {

HWY_EXPORT(Fp8Rows);
HWY_EXPORT(Mxfp4Rows);
HWY_EXPORT(Bnb4Rows);
HWY_EXPORT(GptqRows);
HWY_EXPORT(AwqRows);

void fp8_rows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  HWY_DYNAMIC_DISPATCH(Fp8Rows)(p, codes, r0, r1, out);
}
void mxfp4_rows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  HWY_DYNAMIC_DISPATCH(Mxfp4Rows)(p, codes, r0, r1, out);
}
void bnb4_rows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  HWY_DYNAMIC_DISPATCH(Bnb4Rows)(p, codes, r0, r1, out);
}
void gptq_rows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  HWY_DYNAMIC_DISPATCH(GptqRows)(p, codes, r0, r1, out);
}
void awq_rows(const Params& p, const uint8_t* codes, uint64_t r0, uint64_t r1, float* out) {
  HWY_DYNAMIC_DISPATCH(AwqRows)(p, codes, r0, r1, out);
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
      if (p.bits == 3) {
        if (!p.scales || !p.zeros || !p.group_index || p.cols % 32 || p.rows % 32)
          return fail("GPTQ 3-bit needs scales, zeros, g_idx and whole 3-word groups of 32 codes");
        return gptq_rows;
      }
      if (p.bits != 2 && p.bits != 4 && p.bits != 8) return fail("GPTQ decodes 2-, 3-, 4- and 8-bit codes, not " + std::to_string(p.bits));
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

}  // namespace packed_detail

uint64_t packed_scheme_mask() { return (uint64_t{1} << TM_PACKED_COUNT_) - 1; }

tm_status run_dequantize_packed(const tm_kernel_call_v1& c, std::string* error) {
  using packed_detail::Params;
  if (c.params_size < sizeof(Params) || !c.params) {
    *error = "dequantize.packed: params missing";
    return TM_ERR_INVALID_ARGUMENT;
  }
  const Params& p = *static_cast<const Params*>(c.params);
  const packed_detail::RowDecoder decode = packed_detail::decoder_for(p, error);
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
#endif  // HWY_ONCE
