// Bitshuffle's bit transpose of one block (the transform inside HDF5 filter 32008), both directions.
//
// Layout contract (bitshuffle 0.3/0.5, "bit-transposed per block"): a block of `m` elements of `s` bytes,
// m a multiple of 8, is stored as 8·s rows of m/8 bytes. Row 8·b + i holds bit i of byte b (little-endian
// byte order inside the element) of every element: element j's bit sits in row byte j/8, bit j%8
// (least significant bit first). Shuffle and unshuffle are exact inverses; both are byte-exact with
// the bitshuffle library (tested against the HDF5 filter in tests/unit/bitshuffle_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tmorph {

// Unshuffles one block: `in` holds m·s shuffled bytes, `out` receives m elements of s bytes.
// SIMD (Highway, dynamic dispatch) for s = 1, 2, 4; a portable path for other sizes. Requires m % 8 == 0;
// in and out must not overlap.
void bit_unshuffle_block(const uint8_t* in, uint8_t* out, size_t m, size_t s);

// The Highway SIMD target the dispatcher picked on this machine (e.g. "AVX3"), for provenance.
const char* bit_unshuffle_simd_target();

// The portable definition of the same transform (the reference the SIMD path is tested against).
void bit_unshuffle_block_reference(const uint8_t* in, uint8_t* out, size_t m, size_t s);

// The forward transform (for the encoder that writes demo acquisitions). Requires m % 8 == 0.
void bit_shuffle_block(const uint8_t* in, uint8_t* out, size_t m, size_t s);

}  // namespace tmorph
