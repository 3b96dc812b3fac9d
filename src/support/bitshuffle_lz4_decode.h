// Decoding one chunk of HDF5 filter 32008 (bitshuffle + LZ4), the part shared by the per-frame reader
// (formats/bitshuffle_lz4.h, which throws tmorph::Error naming the file and frame) and the CPU kernel of
// TM_OP_DECODE_BITSHUFFLE_LZ4 (which reports a tm_status). No exceptions: failures are returned.
//
// Chunk layout (all integers big-endian):
//   [0, 8)   uncompressed size of the chunk in bytes
//   [8, 12)  block size in BYTES (elements × element size); the element count is a multiple of 8
//   then, for each full block and for the final partial block (the leftover elements rounded down to a
//   multiple of 8, if any): a 4-byte compressed size followed by that many bytes of one LZ4 block, whose
//   decompressed bytes are the block bit-shuffled (support/bitshuffle.h);
//   then the last (elements % 8) elements, stored raw.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tmorph {

// bitshuffle's default block (elements) when the filter options give 0: 8192 bytes' worth, a multiple
// of 8, at least 128.
uint32_t bitshuffle_default_block_elements(uint32_t element_size);

// Decodes one chunk into out, which must hold exactly out_bytes (a multiple of element_size). Returns an
// empty string, or what is wrong: a header that disagrees with out_bytes, a block size that is not a
// positive multiple of 8 elements, a truncated size prefix or block, an LZ4 error or short block, bytes
// left over; naming the block and its byte offset in the chunk. Never reads past chunk + chunk_bytes or
// writes past out + out_bytes. `scratch` is reused between calls (it grows to one block).
std::string decode_bitshuffle_lz4(const uint8_t* chunk, uint64_t chunk_bytes, uint32_t element_size, uint8_t* out,
                                  uint64_t out_bytes, std::vector<uint8_t>& scratch);

// A valid chunk of `elements` elements of `width` bytes in blocks of block_elements (each block at least 24
// bytes), written without a compressor, for self-tests and calibration: each block's LZ4 stream is 8
// literals, a match at offset 8 repeating them, and 12 last literals; literal and tail bytes are taken from
// `bytes` in turn (cyclically; any bytes make a valid shuffled block).
std::vector<uint8_t> bitshuffle_lz4_chunk_without_compressor(uint64_t elements, uint32_t width, uint64_t block_elements,
                                                             const std::vector<uint8_t>& bytes);

}  // namespace tmorph
