#include "formats/bitshuffle_lz4.h"

#include <lz4.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "formats/bitshuffle.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

uint64_t read_be(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

void write_be(uint8_t* p, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::BadInput, where + ": bitshuffle/LZ4 chunk: " + what);
}

std::string at_block(uint64_t block, uint64_t offset) {
  return "block " + std::to_string(block) + " (chunk byte " + std::to_string(offset) + ")";
}

}  // namespace

uint32_t bitshuffle_default_block_elements(uint32_t element_size) {
  uint32_t n = 8192 / std::max<uint32_t>(element_size, 1);
  n -= n % 8;
  return std::max<uint32_t>(n, 128);
}

void decode_bitshuffle_lz4_chunk(const uint8_t* chunk, uint64_t chunk_bytes, uint32_t element_size, uint8_t* out,
                                 uint64_t out_bytes, const std::string& where, std::vector<uint8_t>& scratch) {
  if (chunk_bytes < 12)
    fail(where, "header needs 12 bytes, chunk has " + std::to_string(chunk_bytes));
  const uint64_t total = read_be(chunk, 8);
  const uint64_t block_bytes = read_be(chunk + 8, 4);
  if (total != out_bytes)
    fail(where, "header (byte 0) says " + std::to_string(total) + " uncompressed bytes, the frame has " +
                    std::to_string(out_bytes));
  if (block_bytes == 0 || block_bytes % element_size != 0 || (block_bytes / element_size) % 8 != 0)
    fail(where, "header (byte 8) block size " + std::to_string(block_bytes) + " bytes is not a positive multiple of 8 " +
                    std::to_string(element_size) + "-byte elements");
  const uint64_t elements = out_bytes / element_size;
  const uint64_t block_elements = block_bytes / element_size;
  const uint64_t tail_elements = elements % 8;
  // Full blocks, then the leftover rounded down to 8 elements (out_bytes bounds the scratch size).
  if (scratch.size() < std::min(block_bytes, out_bytes)) scratch.resize(std::min(block_bytes, out_bytes));
  uint64_t pos = 12, done = 0, block = 0;
  while (done + 8 <= elements) {
    const uint64_t n = std::min(block_elements, (elements - done) - (elements - done) % 8);
    const uint64_t raw = n * element_size;
    if (chunk_bytes - pos < 4) fail(where, at_block(block, pos) + ": size prefix truncated (chunk ends at byte " + std::to_string(chunk_bytes) + ")");
    const uint64_t csize = read_be(chunk + pos, 4);
    pos += 4;
    if (csize > chunk_bytes - pos)
      fail(where, at_block(block, pos - 4) + ": says " + std::to_string(csize) + " compressed bytes, only " +
                      std::to_string(chunk_bytes - pos) + " remain");
    const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(chunk + pos), reinterpret_cast<char*>(scratch.data()),
                                        static_cast<int>(csize), static_cast<int>(raw));
    if (got < 0)
      fail(where, at_block(block, pos - 4) + ": LZ4 error " + std::to_string(got) + " decoding " + std::to_string(csize) +
                      " bytes (corrupt or truncated block)");
    if (static_cast<uint64_t>(got) != raw)
      fail(where, at_block(block, pos - 4) + ": LZ4 block decoded to " + std::to_string(got) + " bytes, expected " +
                      std::to_string(raw));
    bit_unshuffle_block(scratch.data(), out + done * element_size, n, element_size);
    pos += csize;
    done += n;
    ++block;
  }
  const uint64_t tail_bytes = tail_elements * element_size;
  if (chunk_bytes - pos != tail_bytes)
    fail(where, "after " + std::to_string(block) + " blocks at chunk byte " + std::to_string(pos) + ", " +
                    std::to_string(chunk_bytes - pos) + " bytes remain where the " + std::to_string(tail_elements) +
                    " raw tail elements need " + std::to_string(tail_bytes));
  // A frame of no pixels may have no buffer (out == nullptr): memcpy must not be called with it.
  if (tail_bytes) std::memcpy(out + done * element_size, chunk + pos, tail_bytes);
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
