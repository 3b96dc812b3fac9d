// The bitshuffle+LZ4 decoder: SIMD equals the portable definition on every target; chunks written by
// the installed HDF5 bitshuffle filter (another implementation) decode byte for byte like HDF5 decodes
// them; chunks our encoder writes decode through that filter; every malformed chunk is a precise error.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "support/bitshuffle.h"
#include "formats/bitshuffle_lz4.h"
#include "stem/acquisition.h"
#include "simd_targets.h"
#include "stem/frame_reader.h"
#include "stem_fixture.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace {

using test::TempFolder;

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

TEST(Bitshuffle, SimdUnshuffleEqualsTheDefinitionOnEveryTarget) {
  test::for_each_simd_target([](const std::string& target, bool) {
    for (size_t s : {1, 2, 3, 4, 8})
      for (size_t m : {8, 16, 24, 120, 128, 136, 248, 256, 1024, 4096}) {
        const auto in = random_bytes(m * s, m * 31 + s);
        std::vector<uint8_t> simd(m * s), ref(m * s), back(m * s);
        bit_unshuffle_block(in.data(), simd.data(), m, s);
        bit_unshuffle_block_reference(in.data(), ref.data(), m, s);
        ASSERT_EQ(simd, ref) << target << " s=" << s << " m=" << m;
        bit_shuffle_block(ref.data(), back.data(), m, s);
        ASSERT_EQ(back, in) << "shuffle is not the inverse, s=" << s << " m=" << m;
      }
  });
}

TEST(Bitshuffle, TheDefinitionPutsBitIOfByteBOfElementJInRow8BPlusI) {
  // Element 9 of a 16-element block of uint16 has only bit 3 of its high byte set.
  std::vector<uint8_t> elements(32, 0), shuffled(32), back(32);
  elements[9 * 2 + 1] = 1u << 3;
  bit_shuffle_block(elements.data(), shuffled.data(), 16, 2);
  std::vector<uint8_t> expected(32, 0);
  expected[(8 * 1 + 3) * 2 + 9 / 8] = 1u << (9 % 8);  // row 11, byte 1, bit 1
  EXPECT_EQ(shuffled, expected);
  bit_unshuffle_block_reference(shuffled.data(), back.data(), 16, 2);
  EXPECT_EQ(back, elements);
}

struct Shape {
  uint64_t rows, cols;
};

// Frames written by the HDF5 filter plugin, read back raw and decoded by Tensormorph, equal HDF5's decode.
// The HDF5 filter plugin is a shared library that may switch on flush-to-zero / denormals-are-zero when
// it loads; the HDF5 lock restores the environment, so subnormals still compute as subnormals after.
bool subnormals_survive() {
  volatile double tiny = 1e-310;
  return tiny * 1.0 != 0.0 && tiny + 0.0 > 0.0;
}

TEST(Bitshuffle, ChunksWrittenByTheHdf5FilterDecodeByteForByte) {
  ASSERT_TRUE(subnormals_survive());
  struct Check {
    ~Check() { EXPECT_TRUE(subnormals_survive()) << "the floating-point environment changed (FTZ/DAZ)"; }
  } check;
  for (DType dtype : {DType::U8, DType::U16, DType::U32})
    for (Shape shape : {Shape{13, 17}, Shape{1, 5}, Shape{64, 64}, Shape{3, 100}, Shape{257, 3}})
      for (uint32_t block : {0u, 8u, 136u}) {
        TempFolder dir("filter");
        DectrisWriterOptions o;
        o.folder = dir.str();
        o.inline_data = true;
        o.encoder = "hdf5-filter";
        o.block_elements = block;
        const std::string master = test::write_frames(o, dtype, shape.rows, shape.cols, 3, {}, shape.rows * 7 + block);
        const Acquisition acq = open_acquisition(master);
        ASSERT_TRUE(acq.complete()) << acq.readiness_json().dump();
        ASSERT_EQ(acq.parts[0].codec, ChunkCodec::BitshuffleLz4) << acq.readiness_json().dump();
        const auto reference = test::hdf5_decode(master, "entry/data/data", dtype_size(dtype));
        FrameReader reader(acq);
        std::vector<uint8_t> scratch, decoded(reference.size());
        FrameReader::Stored stored;
        for (uint64_t f = 0; f < 3; ++f) {
          reader.read(f, stored);
          reader.decode(f, stored, decoded.data() + f * reader.frame_bytes(), scratch);
        }
        ASSERT_EQ(decoded, reference) << dtype_name(dtype) << " " << shape.rows << "x" << shape.cols << " block " << block;
      }
}

// The other direction: chunks our encoder writes are read by the HDF5 filter as the original pixels.
TEST(Bitshuffle, ChunksOurEncoderWritesDecodeThroughTheHdf5Filter) {
  for (DType dtype : {DType::U8, DType::U16, DType::U32})
    for (Shape shape : {Shape{13, 17}, Shape{2, 3}, Shape{96, 96}}) {
      TempFolder dir("encoder");
      DectrisWriterOptions o;
      o.folder = dir.str();
      o.inline_data = true;
      const std::string master = test::write_frames(o, dtype, shape.rows, shape.cols, 2, {}, 99);
      std::vector<uint8_t> expected;
      for (uint64_t f = 0; f < 2; ++f) {
        const auto px = test::detector_pixels(dtype, shape.rows * shape.cols, 99 + f);
        expected.insert(expected.end(), px.begin(), px.end());
      }
      EXPECT_EQ(test::hdf5_decode(master, "entry/data/data", dtype_size(dtype)), expected) << dtype_name(dtype);
    }
}

// ---- Malformed chunks: each is an error naming where, the block and what was expected.

struct Decoded {
  std::string error;
};

Decoded decode_bytes(const std::vector<uint8_t>& chunk, uint64_t out_bytes) {
  std::vector<uint8_t> out(out_bytes), scratch;
  try {
    decode_bitshuffle_lz4_chunk(chunk.data(), chunk.size(), 2, out.data(), out_bytes, "data_000001.h5, frame 7", scratch);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    return {e.what()};
  }
  return {};
}

class MalformedChunk : public ::testing::Test {
 protected:
  // 1003 uint16 elements in blocks of 256: three full blocks, a last block of 232, 3 raw tail elements.
  std::vector<uint8_t> pixels = test::detector_pixels(DType::U16, 1003, 5);
  std::vector<uint8_t> chunk = encode_bitshuffle_lz4_chunk(pixels.data(), 1003, 2, 256);
  const uint64_t bytes = 1003 * 2;
  uint64_t block_start(int b) const {  // offset of block b's size prefix
    uint64_t pos = 12;
    for (int i = 0; i < b; ++i) pos += 4 + ((uint64_t{chunk[pos]} << 24) | (chunk[pos + 1] << 16) | (chunk[pos + 2] << 8) | chunk[pos + 3]);
    return pos;
  }
};

TEST_F(MalformedChunk, TheIntactChunkRoundTrips) {
  std::vector<uint8_t> out(bytes), scratch;
  decode_bitshuffle_lz4_chunk(chunk.data(), chunk.size(), 2, out.data(), bytes, "x", scratch);
  EXPECT_EQ(out, pixels);
}

TEST_F(MalformedChunk, ShortHeader) {
  chunk.resize(10);
  EXPECT_NE(decode_bytes(chunk, bytes).error.find("data_000001.h5, frame 7: bitshuffle/LZ4 chunk: header needs 12 bytes, chunk has 10"),
            std::string::npos);
}

TEST_F(MalformedChunk, HeaderSizeDisagreesWithTheFrame) {
  chunk[7] ^= 0x10;
  EXPECT_NE(decode_bytes(chunk, bytes).error.find("header (byte 0) says"), std::string::npos) << decode_bytes(chunk, bytes).error;
}

TEST_F(MalformedChunk, BlockSizeNotAMultipleOfEightElements) {
  chunk[11] = 12;  // 6 elements
  chunk[10] = 0;
  EXPECT_NE(decode_bytes(chunk, bytes).error.find("block size 12 bytes is not a positive multiple of 8"), std::string::npos);
}

// Found by the mutation probe: a block size of 0x80000000 bytes (a multiple of 8 elements) decoded a frame
// smaller than one block with exit 0. No LZ4 block can hold more than LZ4_MAX_INPUT_SIZE bytes, so such a
// header is damaged whatever the frame's size; the largest size LZ4 allows is still read.
TEST_F(MalformedChunk, BlockSizeLargerThanLz4CanHold) {
  chunk[8] = 0x80, chunk[9] = 0, chunk[10] = 0, chunk[11] = 0;
  const auto e = decode_bytes(chunk, bytes).error;
  EXPECT_NE(e.find("header (byte 8) block size 2147483648 bytes is more than one LZ4 block can hold (2113929216)"), std::string::npos) << e;
  chunk[8] = 0x7E;  // exactly LZ4_MAX_INPUT_SIZE: allowed by the header check, so the blocks' own sizes decide
  EXPECT_EQ(decode_bytes(chunk, bytes).error.find("more than one LZ4 block"), std::string::npos);
}

TEST_F(MalformedChunk, TruncatedInsideABlock) {
  chunk.resize(block_start(2) + 10);
  const auto e = decode_bytes(chunk, bytes).error;
  EXPECT_NE(e.find("frame 7"), std::string::npos) << e;
  EXPECT_NE(e.find("block 2 (chunk byte " + std::to_string(block_start(2)) + "): says"), std::string::npos) << e;
  EXPECT_NE(e.find("only 6 remain"), std::string::npos) << e;
}

TEST_F(MalformedChunk, TruncatedInsideASizePrefix) {
  chunk.resize(block_start(1) + 2);
  EXPECT_NE(decode_bytes(chunk, bytes).error.find("block 1 (chunk byte " + std::to_string(block_start(1)) + "): size prefix truncated"),
            std::string::npos);
}

TEST_F(MalformedChunk, CorruptedLz4Block) {
  // Overwrite block 1's LZ4 stream with bytes whose first token asks for a far-back match.
  const uint64_t at = block_start(1) + 4;
  for (uint64_t i = 0; i < 8; ++i) chunk[at + i] = 0xFF;
  const auto e = decode_bytes(chunk, bytes).error;
  EXPECT_NE(e.find("block 1 (chunk byte " + std::to_string(block_start(1)) + "): LZ4"), std::string::npos) << e;
}

TEST_F(MalformedChunk, BytesLeftAfterTheLastBlock) {
  chunk.push_back(0);
  EXPECT_NE(decode_bytes(chunk, bytes).error.find("bytes remain where the 3 raw tail elements need 6"), std::string::npos)
      << decode_bytes(chunk, bytes).error;
}

TEST_F(MalformedChunk, ABlockThatDecodesShort) {
  // Re-encode block 0 as a valid LZ4 stream of fewer bytes than the block holds.
  const uint64_t at = block_start(0);
  const uint64_t old_size = (uint64_t{chunk[at]} << 24) | (chunk[at + 1] << 16) | (chunk[at + 2] << 8) | chunk[at + 3];
  std::vector<uint8_t> fixed(chunk.begin(), chunk.begin() + static_cast<long>(at));
  const std::vector<uint8_t> short_block = {0x50, 1, 2, 3, 4, 5};  // literals only: 5 bytes
  for (int i = 3; i >= 0; --i) fixed.push_back(static_cast<uint8_t>(short_block.size() >> (8 * i)));
  fixed.insert(fixed.end(), short_block.begin(), short_block.end());
  fixed.insert(fixed.end(), chunk.begin() + static_cast<long>(at + 4 + old_size), chunk.end());
  const auto e = decode_bytes(fixed, bytes).error;
  EXPECT_NE(e.find("block 0 (chunk byte 12): LZ4 block decoded to 5 bytes, expected 512"), std::string::npos) << e;
}

// Found by tests/fuzz/fuzz_bitshuffle_lz4: a frame of no pixels has no buffer (a zero-size vector's data() is
// null), and the decoders passed it to memcpy (undefined behaviour, reported by make test-asan's UBSan).
TEST(Bitshuffle, AFrameOfNoPixelsDecodesWithoutABuffer) {
  std::vector<uint8_t> scratch;
  decode_bitshuffle_plain_chunk(nullptr, 0, 2, 0, nullptr, 0, "empty frame");
  const std::vector<uint8_t> chunk = encode_bitshuffle_lz4_chunk(nullptr, 0, 2, 0);
  ASSERT_EQ(chunk.size(), 12u);
  decode_bitshuffle_lz4_chunk(chunk.data(), chunk.size(), 2, nullptr, 0, "empty frame", scratch);
}

}  // namespace
}  // namespace tmorph
