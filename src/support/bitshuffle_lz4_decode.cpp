#include "support/bitshuffle_lz4_decode.h"

#include <lz4.h>

#include <algorithm>
#include <cstring>

#include "support/bitshuffle.h"
#include "tensormorph/op_contracts.h"

namespace tmorph {

static_assert(TM_BITSHUFFLE_LZ4_MAX_BLOCK_BYTES == LZ4_MAX_INPUT_SIZE, "the contract's bound is LZ4's own");

namespace {

uint64_t read_be(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
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

std::string decode_bitshuffle_lz4(const uint8_t* chunk, uint64_t chunk_bytes, uint32_t element_size, uint8_t* out,
                                  uint64_t out_bytes, std::vector<uint8_t>& scratch) {
  if (chunk_bytes < 12) return "header needs 12 bytes, chunk has " + std::to_string(chunk_bytes);
  const uint64_t total = read_be(chunk, 8);
  const uint64_t block_bytes = read_be(chunk + 8, 4);
  if (total != out_bytes)
    return "header (byte 0) says " + std::to_string(total) + " uncompressed bytes, the frame has " + std::to_string(out_bytes);
  if (block_bytes == 0 || block_bytes % element_size != 0 || (block_bytes / element_size) % 8 != 0)
    return "header (byte 8) block size " + std::to_string(block_bytes) + " bytes is not a positive multiple of 8 " +
           std::to_string(element_size) + "-byte elements";
  if (block_bytes > TM_BITSHUFFLE_LZ4_MAX_BLOCK_BYTES)
    return "header (byte 8) block size " + std::to_string(block_bytes) + " bytes is more than one LZ4 block can hold (" +
           std::to_string(TM_BITSHUFFLE_LZ4_MAX_BLOCK_BYTES) + "): a damaged header";
  const uint64_t elements = out_bytes / element_size;
  const uint64_t block_elements = block_bytes / element_size;
  const uint64_t tail_elements = elements % 8;
  // Full blocks, then the leftover rounded down to 8 elements (out_bytes bounds the scratch size).
  if (scratch.size() < std::min(block_bytes, out_bytes)) scratch.resize(std::min(block_bytes, out_bytes));
  uint64_t pos = 12, done = 0, block = 0;
  while (done + 8 <= elements) {
    const uint64_t n = std::min(block_elements, (elements - done) - (elements - done) % 8);
    const uint64_t raw = n * element_size;
    if (chunk_bytes - pos < 4)
      return at_block(block, pos) + ": size prefix truncated (chunk ends at byte " + std::to_string(chunk_bytes) + ")";
    const uint64_t csize = read_be(chunk + pos, 4);
    pos += 4;
    if (csize > chunk_bytes - pos)
      return at_block(block, pos - 4) + ": says " + std::to_string(csize) + " compressed bytes, only " +
             std::to_string(chunk_bytes - pos) + " remain";
    const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(chunk + pos), reinterpret_cast<char*>(scratch.data()),
                                        static_cast<int>(csize), static_cast<int>(raw));
    if (got < 0)
      return at_block(block, pos - 4) + ": LZ4 error " + std::to_string(got) + " decoding " + std::to_string(csize) +
             " bytes (corrupt or truncated block)";
    if (static_cast<uint64_t>(got) != raw)
      return at_block(block, pos - 4) + ": LZ4 block decoded to " + std::to_string(got) + " bytes, expected " + std::to_string(raw);
    bit_unshuffle_block(scratch.data(), out + done * element_size, n, element_size);
    pos += csize;
    done += n;
    ++block;
  }
  const uint64_t tail_bytes = tail_elements * element_size;
  if (chunk_bytes - pos != tail_bytes)
    return "after " + std::to_string(block) + " blocks at chunk byte " + std::to_string(pos) + ", " +
           std::to_string(chunk_bytes - pos) + " bytes remain where the " + std::to_string(tail_elements) +
           " raw tail elements need " + std::to_string(tail_bytes);
  // A frame of no pixels may have no buffer (out == nullptr): memcpy must not be called with it.
  if (tail_bytes) std::memcpy(out + done * element_size, chunk + pos, tail_bytes);
  return {};
}

std::vector<uint8_t> bitshuffle_lz4_chunk_without_compressor(uint64_t elements, uint32_t width, uint64_t block_elements,
                                                             const std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> out;
  uint64_t next = 0;
  auto put_be = [&](uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  auto put_bytes = [&](uint64_t n) {
    for (uint64_t i = 0; i < n; ++i, ++next) out.push_back(bytes.empty() ? 0 : bytes[next % bytes.size()]);
  };
  put_be(elements * width, 8);
  put_be(block_elements * width, 4);
  const uint64_t whole = elements - elements % 8;
  for (uint64_t done = 0; done < whole;) {
    const uint64_t n = std::min(block_elements, whole - done), match = n * width - 20;
    const uint64_t extra = match - 4 < 15 ? 0 : (match - 4 - 15) / 255 + 1;
    put_be(1 + 8 + 2 + extra + 1 + 12, 4);  // the stream's size
    out.push_back(static_cast<uint8_t>(0x80 | (match - 4 < 15 ? match - 4 : 15)));
    put_bytes(8);
    out.push_back(8), out.push_back(0);
    if (extra) {
      uint64_t rest = match - 4 - 15;
      for (; rest >= 255; rest -= 255) out.push_back(255);
      out.push_back(static_cast<uint8_t>(rest));
    }
    out.push_back(0xc0);
    put_bytes(12);
    done += n;
  }
  put_bytes((elements - whole) * width);
  return out;
}

}  // namespace tmorph
