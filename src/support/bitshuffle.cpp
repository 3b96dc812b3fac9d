#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "support/bitshuffle.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>

#include "support/bitshuffle.h"

#ifndef TM_BITSHUFFLE_SCALAR_ONCE
#define TM_BITSHUFFLE_SCALAR_ONCE
namespace tmorph::bitshuffle_detail {

// Transposes the 8x8 bit matrix whose row i is byte i of x (bit k = column k): afterwards byte k bit i
// holds what byte i bit k held. Three rounds of swapping off-diagonal blocks (1x1, 2x2, 4x4).
inline uint64_t transpose_bits_8x8(uint64_t x) {
  uint64_t t = (x ^ (x >> 7)) & 0x00AA00AA00AA00AAull;
  x ^= t ^ (t << 7);
  t = (x ^ (x >> 14)) & 0x0000CCCC0000CCCCull;
  x ^= t ^ (t << 14);
  t = (x ^ (x >> 28)) & 0x00000000F0F0F0F0ull;
  x ^= t ^ (t << 28);
  return x;
}

// Unshuffles the element groups [g_begin, g_end) (group g = elements 8g..8g+7) one 64-bit word per plane.
inline void unshuffle_groups(const uint8_t* in, uint8_t* out, size_t rowlen, size_t s, size_t g_begin, size_t g_end) {
  for (size_t g = g_begin; g < g_end; ++g)
    for (size_t b = 0; b < s; ++b) {
      uint64_t w = 0;
      for (size_t i = 0; i < 8; ++i) w |= static_cast<uint64_t>(in[(8 * b + i) * rowlen + g]) << (8 * i);
      w = transpose_bits_8x8(w);
      for (size_t k = 0; k < 8; ++k) out[(8 * g + k) * s + b] = static_cast<uint8_t>(w >> (8 * k));
    }
}

}  // namespace tmorph::bitshuffle_detail
#endif

HWY_BEFORE_NAMESPACE();
namespace tmorph {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR
// The 8x8 bit transpose of every 64-bit lane (see transpose_bits_8x8).
template <class V>
HWY_INLINE V TransposeBitsLanes(V x) {
  const hn::DFromV<V> d;
  auto t = hn::And(hn::Xor(x, hn::ShiftRight<7>(x)), hn::Set(d, 0x00AA00AA00AA00AAull));
  x = hn::Xor(hn::Xor(x, t), hn::ShiftLeft<7>(t));
  t = hn::And(hn::Xor(x, hn::ShiftRight<14>(x)), hn::Set(d, 0x0000CCCC0000CCCCull));
  x = hn::Xor(hn::Xor(x, t), hn::ShiftLeft<14>(t));
  t = hn::And(hn::Xor(x, hn::ShiftRight<28>(x)), hn::Set(d, 0x00000000F0F0F0F0ull));
  x = hn::Xor(hn::Xor(x, t), hn::ShiftLeft<28>(t));
  return x;
}

// Unshuffles 16 element groups (128 elements) starting at group c, for S-byte elements. For each byte
// plane b the 8 rows' 16 bytes are transposed into one 64-bit word per group (three interleave rounds),
// whose 8x8 bit transpose yields byte b of the group's 8 elements; the planes are then interleaved
// into element order.
template <size_t S>
HWY_INLINE void UnshuffleSixteenGroups(const uint8_t* HWY_RESTRICT in, uint8_t* HWY_RESTRICT out, size_t rowlen, size_t c) {
  const hn::Full128<uint8_t> d8;
  const hn::Full128<uint16_t> d16;
  const hn::Full128<uint32_t> d32;
  const hn::Full128<uint64_t> d64;
  using V8 = hn::Vec<decltype(d8)>;
  V8 plane[S][8];  // plane[b][j]: byte b of the elements of groups c+2j (low half) and c+2j+1 (high half)
  for (size_t b = 0; b < S; ++b) {
    const uint8_t* rows = in + 8 * b * rowlen + c;
    V8 r[8];
    for (size_t i = 0; i < 8; ++i) r[i] = hn::LoadU(d8, rows + i * rowlen);
    // Round 1 (bytes): pairs of rows, columns 0-7 and 8-15.
    V8 lo[4], hi[4];
    for (size_t p = 0; p < 4; ++p) {
      lo[p] = hn::InterleaveLower(d8, r[2 * p], r[2 * p + 1]);
      hi[p] = hn::InterleaveUpper(d8, r[2 * p], r[2 * p + 1]);
    }
    // Round 2 (16-bit): rows 0-3 and 4-7 of four columns each.
    hn::Vec<decltype(d16)> q[2][4];
    for (size_t h = 0; h < 2; ++h) {
      const auto a = hn::BitCast(d16, lo[2 * h]), bb = hn::BitCast(d16, lo[2 * h + 1]);
      const auto c2 = hn::BitCast(d16, hi[2 * h]), d2 = hn::BitCast(d16, hi[2 * h + 1]);
      q[h][0] = hn::InterleaveLower(d16, a, bb);   // columns 0-3
      q[h][1] = hn::InterleaveUpper(d16, a, bb);   // columns 4-7
      q[h][2] = hn::InterleaveLower(d16, c2, d2);  // columns 8-11
      q[h][3] = hn::InterleaveUpper(d16, c2, d2);  // columns 12-15
    }
    // Round 3 (32-bit): whole 8-byte words, two columns per vector, in column order.
    for (size_t k = 0; k < 4; ++k) {
      const auto a = hn::BitCast(d32, q[0][k]), bb = hn::BitCast(d32, q[1][k]);
      plane[b][2 * k] = hn::BitCast(d8, TransposeBitsLanes(hn::BitCast(d64, hn::InterleaveLower(d32, a, bb))));
      plane[b][2 * k + 1] = hn::BitCast(d8, TransposeBitsLanes(hn::BitCast(d64, hn::InterleaveUpper(d32, a, bb))));
    }
  }
  for (size_t j = 0; j < 8; ++j) {
    uint8_t* dst = out + (c + 2 * j) * 8 * S;  // group c+2j, then group c+2j+1 right after it
    if constexpr (S == 1) {
      hn::StoreU(plane[0][j], d8, dst);
    } else if constexpr (S == 2) {
      hn::StoreU(hn::InterleaveLower(d8, plane[0][j], plane[1][j]), d8, dst);
      hn::StoreU(hn::InterleaveUpper(d8, plane[0][j], plane[1][j]), d8, dst + 16);
    } else {
      const auto l01 = hn::BitCast(d16, hn::InterleaveLower(d8, plane[0][j], plane[1][j]));
      const auto h01 = hn::BitCast(d16, hn::InterleaveUpper(d8, plane[0][j], plane[1][j]));
      const auto l23 = hn::BitCast(d16, hn::InterleaveLower(d8, plane[2][j], plane[3][j]));
      const auto h23 = hn::BitCast(d16, hn::InterleaveUpper(d8, plane[2][j], plane[3][j]));
      hn::StoreU(hn::BitCast(d8, hn::InterleaveLower(d16, l01, l23)), d8, dst);
      hn::StoreU(hn::BitCast(d8, hn::InterleaveUpper(d16, l01, l23)), d8, dst + 16);
      hn::StoreU(hn::BitCast(d8, hn::InterleaveLower(d16, h01, h23)), d8, dst + 32);
      hn::StoreU(hn::BitCast(d8, hn::InterleaveUpper(d16, h01, h23)), d8, dst + 48);
    }
  }
}
#endif

void BitUnshuffle(const uint8_t* HWY_RESTRICT in, uint8_t* HWY_RESTRICT out, size_t m, size_t s) {
  const size_t rowlen = m / 8;
  size_t simd_groups = 0;
#if HWY_TARGET != HWY_SCALAR
  if (s == 1 || s == 2 || s == 4) {
    simd_groups = rowlen & ~size_t{15};
    for (size_t c = 0; c < simd_groups; c += 16) {
      if (s == 1) UnshuffleSixteenGroups<1>(in, out, rowlen, c);
      else if (s == 2) UnshuffleSixteenGroups<2>(in, out, rowlen, c);
      else UnshuffleSixteenGroups<4>(in, out, rowlen, c);
    }
  }
#endif
  bitshuffle_detail::unshuffle_groups(in, out, rowlen, s, simd_groups, rowlen);
}

const char* SimdTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace tmorph
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace tmorph {
HWY_EXPORT(BitUnshuffle);
HWY_EXPORT(SimdTargetName);

const char* bit_unshuffle_simd_target() { return HWY_DYNAMIC_DISPATCH(SimdTargetName)(); }

void bit_unshuffle_block(const uint8_t* in, uint8_t* out, size_t m, size_t s) {
  HWY_DYNAMIC_DISPATCH(BitUnshuffle)(in, out, m, s);
}

void bit_unshuffle_block_reference(const uint8_t* in, uint8_t* out, size_t m, size_t s) {
  const size_t rowlen = m / 8;
  for (size_t j = 0; j < m; ++j)
    for (size_t b = 0; b < s; ++b) {
      unsigned v = 0;
      for (size_t i = 0; i < 8; ++i) v |= ((in[(8 * b + i) * rowlen + j / 8] >> (j % 8)) & 1u) << i;
      out[j * s + b] = static_cast<uint8_t>(v);
    }
}

void bit_shuffle_block(const uint8_t* in, uint8_t* out, size_t m, size_t s) {
  const size_t rowlen = m / 8;
  for (size_t g = 0; g < rowlen; ++g)
    for (size_t b = 0; b < s; ++b) {
      uint64_t w = 0;
      for (size_t k = 0; k < 8; ++k) w |= static_cast<uint64_t>(in[(8 * g + k) * s + b]) << (8 * k);
      w = bitshuffle_detail::transpose_bits_8x8(w);
      for (size_t i = 0; i < 8; ++i) out[(8 * b + i) * rowlen + g] = static_cast<uint8_t>(w >> (8 * i));
    }
}

}  // namespace tmorph
#endif
