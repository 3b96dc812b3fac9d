// libFuzzer harness: the bitshuffle chunk decoders (src/formats/bitshuffle_lz4.h), LZ4 and uncompressed,
// for element sizes 1, 2, 4 and 8.
//
// Input: byte 0 chooses the element size (bits 0-1: 1, 2, 4, 8) and the decoder (bit 2: uncompressed);
// bytes 1-2 (little-endian) give the uncompressed decoder's block in elements (0: the default) or, when
// the LZ4 chunk's own header cannot size the frame, the frame's size in elements; the rest is the chunk.
// The frame buffer is the caller's, as in stem/frame_reader.cpp: sized from the LZ4 header only when that
// is at most kMaxFrameBytes (a lying header then meets a frame of another size, which must be refused).
// A chunk that decodes must decode again, to the same frame, after our encoder wrote it back.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <vector>

#include "formats/bitshuffle_lz4.h"
#include "fuzz_support.h"
#include "tensormorph/error.h"

namespace {

constexpr uint64_t kMaxFrameBytes = uint64_t{1} << 20;

uint64_t read_be(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint32_t element_size = 1u << (data[0] & 3);
  const bool plain = data[0] & 4;
  const uint32_t param = data[1] | (uint32_t{data[2]} << 8);
  const uint8_t* chunk = data + 3;
  const uint64_t chunk_bytes = size - 3;
  // The chunk in a buffer of its own size, so that any read past it is caught.
  std::vector<uint8_t> owned(chunk, chunk + chunk_bytes);
  try {
    if (plain) {
      const uint64_t out_bytes = chunk_bytes - chunk_bytes % element_size;
      std::vector<uint8_t> out(out_bytes);
      tmorph::decode_bitshuffle_plain_chunk(owned.data(), out_bytes, element_size, param, out.data(), out_bytes, "fuzz chunk");
      return 0;
    }
    uint64_t out_bytes = uint64_t{param} * element_size;
    if (chunk_bytes >= 12) {
      const uint64_t claimed = read_be(chunk, 8);
      if (claimed <= kMaxFrameBytes && claimed % element_size == 0) out_bytes = claimed;
    }
    std::vector<uint8_t> out(out_bytes), scratch;
    tmorph::decode_bitshuffle_lz4_chunk(owned.data(), chunk_bytes, element_size, out.data(), out_bytes, "fuzz chunk", scratch);
    TM_FUZZ_CHECK(scratch.size() <= out_bytes);
    // The chunk's block (a positive multiple of 8 elements), at most the frame's whole blocks: the encoder
    // allocates one block, and it is not the code under test.
    const uint64_t elements = out_bytes / element_size;
    const uint32_t block_elements = static_cast<uint32_t>(
        std::min<uint64_t>(read_be(chunk + 8, 4) / element_size, std::max<uint64_t>(8, elements - elements % 8)));
    const std::vector<uint8_t> again = tmorph::encode_bitshuffle_lz4_chunk(out.data(), out_bytes / element_size, element_size, block_elements);
    std::vector<uint8_t> back(out_bytes);
    tmorph::decode_bitshuffle_lz4_chunk(again.data(), again.size(), element_size, back.data(), out_bytes, "re-encoded chunk", scratch);
    TM_FUZZ_CHECK(back == out);
  } catch (const tmorph::Error&) {
  }
  return 0;
}
