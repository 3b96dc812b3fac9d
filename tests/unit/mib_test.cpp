// Merlin .mib parsing and decoding (src/stem/formats/mib*.h): the header fields, the raw word order on hand-written
// bytes (pixel k of a big-endian 64-bit word in bits [k·b, (k+1)·b)), the quad's chip placement, and refusals.
// Whole files, products and readiness: tests/cli/test_stem_mib.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "stem/formats/mib.h"
#include "stem/formats/mib_decode.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace {

std::vector<uint8_t> mib_test_header(const std::string& fields, size_t bytes = 384) {
  std::vector<uint8_t> h(bytes, 0);
  std::memcpy(h.data(), fields.data(), std::min(fields.size(), bytes));
  return h;
}

const std::string kMibSingle12 =
    "MQ1,000007,00384,01,0256,0256,R64,   1x1,01,2020-05-18 16:51:49.971626,0.000555,0,0,0,1.200000E+1,5.110000E+2,"
    "0.000000E+0,0.000000E+0,0.000000E+0,0.000000E+0,0.000000E+0,0.000000E+0,3RX,175,511,000,MQ1A,"
    "2020-05-18T14:51:49.971626178Z,555000ns,12,";

TEST(MibHeader, ParsesTheFieldsTheReaderUses) {
  const auto bytes = mib_test_header(kMibSingle12);
  const MibFrameHeader h = parse_mib_frame_header(bytes.data(), bytes.size(), "f.mib", 0);
  EXPECT_EQ(h.sequence, 7u);
  EXPECT_EQ(h.header_bytes, 384u);
  EXPECT_EQ(h.chips, 1u);
  EXPECT_EQ(h.width, 256u);
  EXPECT_EQ(h.pixel_type, "R64");
  EXPECT_EQ(h.chip_layout, "1x1");
  EXPECT_TRUE(h.raw());
  EXPECT_EQ(h.counter_depth, 12u);
  EXPECT_DOUBLE_EQ(*h.shutter_s, 0.000555);
  EXPECT_DOUBLE_EQ(*h.shutter_ns, 555000.0);
  ASSERT_EQ(h.thresholds_kev.size(), 8u);
  EXPECT_DOUBLE_EQ(h.thresholds_kev[1], 511.0);
  EXPECT_EQ(std::string(kMibSingle12.substr(h.layout_begin, h.layout_end - h.layout_begin)), "00384,01,0256,0256,R64,   1x1");
}

TEST(MibHeader, RefusesLiesNamingFileAndOffset) {
  auto refusal = [](const std::string& text, size_t n) {
    const auto bytes = mib_test_header(text, std::max<size_t>(n, 1));
    try {
      parse_mib_frame_header(bytes.data(), n, "f.mib", 1234);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(kMibSingle12, 200).find("f.mib: frame header at byte 1234: the header says it is 384 bytes, only 200"), std::string::npos);
  EXPECT_NE(refusal("MQ1,000001,00384,01,0256,0256", 384).find("expected at least 8"), std::string::npos);
  EXPECT_NE(refusal("MQ1,000001,0x384,01,0256,0256,U16,1x1,", 384).find("field 2 (header bytes)"), std::string::npos);
  EXPECT_NE(refusal("MQ1,000001,00384,00,0256,0256,U16,1x1,", 384).find("0 chips"), std::string::npos);
  EXPECT_NE(refusal("XQ1,", 384).find("expected 'MQ1,'"), std::string::npos);
}

MibFrameHeader mib_raw_header(uint32_t chips, uint64_t width, uint32_t depth) {
  MibFrameHeader h;
  h.chips = chips;
  h.width = width;
  h.height = 256;
  h.pixel_type = "R64";
  h.chip_layout = chips == 4 ? "2x2G" : "1x1";
  h.counter_depth = depth;
  h.header_bytes = chips == 4 ? 768 : 384;
  return h;
}

TEST(MibDecode, RawWordsAreBigEndianWithPixelZeroInTheLowBits) {
  // 12-bit: one word 00 04 00 03 00 02 00 01 holds pixels 1, 2, 3, 4.
  const MibPixels p12 = mib_pixels(mib_raw_header(1, 256, 12), std::nullopt, "f.mib", 0);
  ASSERT_EQ(p12.stored_bytes, 256u * 256 * 2);
  std::vector<uint8_t> stored(p12.stored_bytes, 0), frame(256 * 256 * 2);
  const uint8_t word[8] = {0, 4, 0, 3, 0, 2, 0, 1};
  std::memcpy(stored.data(), word, 8);
  mib_unpack(p12, stored.data(), frame.data());
  const auto* px = reinterpret_cast<const uint16_t*>(frame.data());
  EXPECT_EQ((std::vector<uint16_t>{px[0], px[1], px[2], px[3], px[4]}), (std::vector<uint16_t>{1, 2, 3, 4, 0}));
  // 1-bit: the word's least significant bit (last byte, bit 0) is pixel 0; its first byte's top bit is pixel 63.
  const MibPixels p1 = mib_pixels(mib_raw_header(1, 256, 1), std::nullopt, "f.mib", 0);
  std::vector<uint8_t> bits(p1.stored_bytes, 0), frame1(256 * 256);
  bits[7] = 0x01, bits[0] = 0x80, bits[15] = 0x02;
  mib_unpack(p1, bits.data(), frame1.data());
  EXPECT_EQ(frame1[0], 1);
  EXPECT_EQ(frame1[63], 1);
  EXPECT_EQ(frame1[65], 1);
  EXPECT_EQ(std::count(frame1.begin(), frame1.end(), 1), 3);
}

TEST(MibDecode, QuadChipsAndTwentyFourBits) {
  // 24-bit quad: the high plane's first pixel is stored row 0, chunk 0 = frame (511, 511).
  const MibPixels p = mib_pixels(mib_raw_header(4, 2048, 24), std::nullopt, "f.mib", 0);
  ASSERT_TRUE(p.quad);
  ASSERT_EQ(p.rows, 512u);
  std::vector<uint8_t> stored(p.stored_bytes, 0), frame(512 * 512 * 4);
  stored[7] = 0x0a;                        // high plane, pixel 0 = 10 → (511, 511)
  stored[p.stored_bytes / 2 + 7] = 0x05;   // low plane, pixel 0 = 5
  stored[2 * 768 + 7] = 0x01;              // high plane, pixel 768 (chunk 3, x 0) → (0, 0)
  mib_unpack(p, stored.data(), frame.data());
  const auto* px = reinterpret_cast<const uint32_t*>(frame.data());
  EXPECT_EQ(px[511 * 512 + 511], (10u << 12) | 5u);
  EXPECT_EQ(px[0], 1u << 12);
  EXPECT_THROW(mib_pixels(mib_raw_header(4, 1024, 24), std::nullopt, "f.mib", 0), Error);  // 24-bit stores two planes
  EXPECT_THROW(mib_pixels(mib_raw_header(2, 512, 12), std::nullopt, "f.mib", 0), Error);   // raw Nx1 is not read
  EXPECT_THROW(mib_pixels(mib_raw_header(1, 256, 8), std::nullopt, "f.mib", 0), Error);    // no 8-bit counters
}

}  // namespace
}  // namespace tmorph
