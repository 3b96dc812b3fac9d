// The chunk format of HDF5 filter 32008 (bitshuffle) with LZ4 compression, as Dectris detectors write it.
//
// Chunk layout: support/bitshuffle_lz4_decode.h, whose decoder this wraps with errors naming the file and frame.
// Without compression (filter option 0) the same blocks appear shuffled but uncompressed, with no
// header and no size prefixes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/bitshuffle_lz4_decode.h"  // bitshuffle_default_block_elements, the decoder itself

namespace tmorph {

// Decodes one LZ4 chunk into out, which must hold exactly out_bytes (the frame's bytes, a multiple of
// element_size). `where` names the chunk in errors ("<file>, frame 12"). Every inconsistency — header
// size that disagrees with out_bytes, a block size that is not a positive multiple of 8 elements, a
// truncated size prefix or block, an LZ4 error or short block, bytes left over — throws
// Error(BadInput) naming `where`, the block index and its byte offset in the chunk. `scratch` is reused
// between calls (it grows to one block).
void decode_bitshuffle_lz4_chunk(const uint8_t* chunk, uint64_t chunk_bytes, uint32_t element_size, uint8_t* out,
                                 uint64_t out_bytes, const std::string& where, std::vector<uint8_t>& scratch);

// Decodes an uncompressed bitshuffle chunk (filter option 0) of out_bytes bytes, blocks of block_elements.
void decode_bitshuffle_plain_chunk(const uint8_t* chunk, uint64_t chunk_bytes, uint32_t element_size,
                                   uint32_t block_elements, uint8_t* out, uint64_t out_bytes, const std::string& where);

// Encodes `elements` elements as one LZ4 chunk (block_elements 0 = the default). Used to write demo data.
std::vector<uint8_t> encode_bitshuffle_lz4_chunk(const uint8_t* data, uint64_t elements, uint32_t element_size,
                                                 uint32_t block_elements);

}  // namespace tmorph
