#include "formats/bitshuffle_lz4.h"

#include <lz4.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "support/bitshuffle.h"
#include "support/bitshuffle_lz4_decode.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

void write_be(uint8_t* p, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::BadInput, where + ": bitshuffle/LZ4 chunk: " + what);
}

}  // namespace

void decode_bitshuffle_lz4_chunk(const uint8_t* chunk, uint64_t chunk_bytes, uint32_t element_size, uint8_t* out,
                                 uint64_t out_bytes, const std::string& where, std::vector<uint8_t>& scratch) {
  const std::string problem = decode_bitshuffle_lz4(chunk, chunk_bytes, element_size, out, out_bytes, scratch);
  if (!problem.empty()) fail(where, problem);
}

void decode_bitshuffle_plain_chunk(const uint8_t* chunk, uint64_t chunk_bytes, uint32_t element_size,
                                   uint32_t block_elements, uint8_t* out, uint64_t out_bytes, const std::string& where) {
  if (chunk_bytes != out_bytes)
    throw Error(ErrorKind::BadInput, where + ": uncompressed bitshuffle chunk has " + std::to_string(chunk_bytes) +
                                         " bytes, the frame has " + std::to_string(out_bytes));
  if (block_elements == 0) block_elements = bitshuffle_default_block_elements(element_size);
  if (block_elements % 8 != 0)
    throw Error(ErrorKind::BadInput, where + ": bitshuffle block size " + std::to_string(block_elements) +
                                         " elements is not a multiple of 8");
  const uint64_t elements = out_bytes / element_size;
  uint64_t done = 0;
  while (done + 8 <= elements) {
    const uint64_t n = std::min<uint64_t>(block_elements, (elements - done) - (elements - done) % 8);
    bit_unshuffle_block(chunk + done * element_size, out + done * element_size, n, element_size);
    done += n;
  }
  if (elements > done) std::memcpy(out + done * element_size, chunk + done * element_size, (elements - done) * element_size);
}

std::vector<uint8_t> encode_bitshuffle_lz4_chunk(const uint8_t* data, uint64_t elements, uint32_t element_size,
                                                 uint32_t block_elements) {
  if (block_elements == 0) block_elements = bitshuffle_default_block_elements(element_size);
  const uint64_t bytes = elements * element_size;
  std::vector<uint8_t> out(12);
  write_be(out.data(), bytes, 8);
  write_be(out.data() + 8, uint64_t{block_elements} * element_size, 4);
  std::vector<uint8_t> shuffled(uint64_t{block_elements} * element_size);
  std::vector<char> packed(static_cast<size_t>(LZ4_compressBound(static_cast<int>(shuffled.size()))));
  uint64_t done = 0;
  while (done + 8 <= elements) {
    const uint64_t n = std::min<uint64_t>(block_elements, (elements - done) - (elements - done) % 8);
    bit_shuffle_block(data + done * element_size, shuffled.data(), n, element_size);
    const int csize = LZ4_compress_default(reinterpret_cast<const char*>(shuffled.data()), packed.data(),
                                           static_cast<int>(n * element_size), static_cast<int>(packed.size()));
    if (csize <= 0) throw Error(ErrorKind::Internal, "LZ4_compress_default failed");
    const size_t at = out.size();
    out.resize(at + 4 + static_cast<size_t>(csize));
    write_be(out.data() + at, static_cast<uint64_t>(csize), 4);
    std::memcpy(out.data() + at + 4, packed.data(), static_cast<size_t>(csize));
    done += n;
  }
  out.insert(out.end(), data + done * element_size, data + elements * element_size);
  return out;
}

}  // namespace tmorph
