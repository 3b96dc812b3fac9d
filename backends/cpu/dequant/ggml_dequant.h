// CPU dequantization of ggml's quantized block formats (GGUF tensor types) to float32.
//
// Contract: the values are bit-identical to ggml's reference row dequantizers (`dequantize_row_*` in
// ggml-quants.c): every fp16 scale is widened exactly, and each output is computed with the same float32
// operations in the same order (products of three factors associate as ggml writes them). The project
// builds with -ffp-contract=off, so no multiply-add is fused behind our back.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tmorph::cpu {

// One block format: `block_bytes` bytes encode `block_elements` consecutive elements of a row.
struct GgmlBlockFormat {
  uint32_t type_id;         // ggml type id (GGUF tensor type)
  const char* name;         // ggml's name: "Q4_0", "IQ2_XXS", ...
  uint32_t block_elements;  // elements per block
  uint32_t block_bytes;     // bytes per block
};

// The format with this ggml type id, or nullptr when there is no dequantizer for it.
const GgmlBlockFormat* ggml_block_format(uint32_t type_id);

// Dequantizes `blocks` consecutive blocks of `format` from `src` into `dst` (blocks * block_elements
// floats), bit-identical to ggml's dequantize_row_*. src need not be aligned; src and dst must not overlap.
// `format` must be (a copy of) a format from ggml_block_format; for any other type id dst is filled with
// quiet NaNs. Single-threaded: callers split large runs across threads by whole blocks.
void dequantize_ggml_blocks(const GgmlBlockFormat& format, const uint8_t* src, uint64_t blocks, float* dst);

// ---------------------------------------------------------------------------------------------------
// Internal to backends/cpu/dequant/*.cpp (and their unit tests): shared helpers, the per-format block
// decoders and the lookup grids.
namespace ggml_detail {

// Little-endian loads from unaligned memory (the host is little-endian; ggml_dequant.cpp asserts it).
inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline float bits_to_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// IEEE binary16 bits to float32, exactly (every half is a float): normals re-biased, subnormals scaled
// from their integer mantissa (m * 2^-24 is exact), infinities and NaNs (payload kept) mapped through.
inline float fp16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t magnitude = h & 0x7fffu;
  if (magnitude >= 0x7c00u) return bits_to_f32(sign | 0x7f800000u | ((magnitude & 0x3ffu) << 13));
  if (magnitude >= 0x0400u) return bits_to_f32(sign | ((magnitude << 13) + (112u << 23)));
  const float sub = static_cast<float>(magnitude) * 0x1p-24f;  // 0 stays 0
  return bits_to_f32(sign | std::bit_cast<uint32_t>(sub));
}
// The fp16 at p (unaligned) as float32.
inline float load_fp16(const uint8_t* p) { return fp16_to_f32(load_u16(p)); }

// E8M0 scale byte to float32 as ggml's ggml_e8m0_to_fp32_half: 2^(e - 128), i.e. half the OCP MX scale
// (MXFP4 values are stored doubled). e = 0 and 1 give the float subnormals 2^-128 and 2^-127; no NaN.
inline float e8m0_half_to_f32(uint8_t e) {
  const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
  return bits_to_f32(bits);
}

// Runs decode_block(block, out) over `blocks` consecutive blocks of kBlockBytes bytes, each decoding
// to kBlockElements floats. Each block is first copied to a local buffer: the decoder's loads then
// cannot alias its stores (so its loops vectorise without runtime overlap checks) and need no alignment.
template <uint32_t kBlockBytes, uint32_t kBlockElements, class DecodeBlock>
inline void for_each_block(const uint8_t* src, uint64_t blocks, float* dst, DecodeBlock decode_block) {
  for (uint64_t i = 0; i < blocks; ++i) {
    uint8_t block[kBlockBytes];
    std::memcpy(block, src + i * kBlockBytes, kBlockBytes);
    decode_block(static_cast<const uint8_t*>(block), dst + i * kBlockElements);
  }
}

// One format's decoder: `blocks` blocks at `src` (unaligned) to blocks * block_elements floats at dst.
using BlockDecoder = void (*)(const uint8_t* src, uint64_t blocks, float* dst);

// Legacy 32-element blocks (ggml_legacy.cpp).
void decode_q4_0(const uint8_t* src, uint64_t blocks, float* dst);
void decode_q4_1(const uint8_t* src, uint64_t blocks, float* dst);
void decode_q5_0(const uint8_t* src, uint64_t blocks, float* dst);
void decode_q5_1(const uint8_t* src, uint64_t blocks, float* dst);
void decode_q8_0(const uint8_t* src, uint64_t blocks, float* dst);
void decode_q8_1(const uint8_t* src, uint64_t blocks, float* dst);
void decode_mxfp4(const uint8_t* src, uint64_t blocks, float* dst);
// K-quants and ternary 256-element super-blocks (ggml_kquants.cpp).
void decode_q2_k(const uint8_t* src, uint64_t blocks, float* dst);
void decode_q3_k(const uint8_t* src, uint64_t blocks, float* dst);
void decode_q4_k(const uint8_t* src, uint64_t blocks, float* dst);
void decode_q5_k(const uint8_t* src, uint64_t blocks, float* dst);
void decode_q6_k(const uint8_t* src, uint64_t blocks, float* dst);
void decode_q8_k(const uint8_t* src, uint64_t blocks, float* dst);
void decode_tq1_0(const uint8_t* src, uint64_t blocks, float* dst);
void decode_tq2_0(const uint8_t* src, uint64_t blocks, float* dst);
// Lattice / non-linear "IQ" formats (ggml_iquants.cpp).
void decode_iq2_xxs(const uint8_t* src, uint64_t blocks, float* dst);
void decode_iq2_xs(const uint8_t* src, uint64_t blocks, float* dst);
void decode_iq2_s(const uint8_t* src, uint64_t blocks, float* dst);
void decode_iq3_xxs(const uint8_t* src, uint64_t blocks, float* dst);
void decode_iq3_s(const uint8_t* src, uint64_t blocks, float* dst);
void decode_iq1_s(const uint8_t* src, uint64_t blocks, float* dst);
void decode_iq1_m(const uint8_t* src, uint64_t blocks, float* dst);
void decode_iq4_nl(const uint8_t* src, uint64_t blocks, float* dst);
void decode_iq4_xs(const uint8_t* src, uint64_t blocks, float* dst);

// Lookup grids (ggml_iq_grids.cpp). Row i of a grid holds the element values of grid point i, in element
// order (ggml stores the same bytes as one little-endian uint64/uint32 per point).
template <size_t kPoints, size_t kWidth, class T = uint8_t>
using Grid = std::array<std::array<T, kWidth>, kPoints>;
extern const Grid<256, 8> kIq2xxsGrid;      // values 8, 25, 43
extern const Grid<512, 8> kIq2xsGrid;       // values 8, 25, 43
extern const Grid<1024, 8> kIq2sGrid;       // values 8, 25, 43
extern const Grid<256, 4> kIq3xxsGrid;      // values 4, 12, ..., 52, 62
extern const Grid<512, 4> kIq3sGrid;        // odd values 1..15
extern const Grid<2048, 8, int8_t> kIq1sGrid;  // values -1, 0, 1
// 7 sign bits plus an even-parity 8th bit (ggml's ksigns_iq2xs): bit j set = element j is negative.
extern const std::array<uint8_t, 128> kIq2Signs;
extern const std::array<int8_t, 16> kIq4nlValues;  // IQ4_NL / IQ4_XS non-linear levels
extern const std::array<int8_t, 16> kFp4Values;    // E2M1 values doubled (MXFP4), by 4-bit code

}  // namespace ggml_detail
}  // namespace tmorph::cpu
