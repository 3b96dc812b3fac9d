// The stored chunks of a frame window (stem/stored_chunks.h, served by GET …/chunks for the page's WGSL decoder):
// each chunk, decoded by the CPU decoder and masked as the products mask, is the frame load_stem gives; windows
// outside the acquisition and a byte bound that a window passes are refused naming the frames.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>

#include "formats/bitshuffle_lz4.h"
#include "stem/acquisition.h"
#include "stem/demo/simulate.h"
#include "stem/load.h"
#include "stem/stored_chunks.h"
#include "stem_fixture.h"
#include "tensormorph/error.h"

namespace tmorph {
namespace {

// A 4 x 5 scan of 20 x 20 frames over 2 data files (12 + 8 frames), with dead pixels.
std::string write_chunks_demo(DType dtype, const std::string& folder) {
  StemSimulationParams p;
  p.scan_rows = 4;
  p.scan_cols = 5;
  p.detector = 20;
  p.bf_radius_px = 4;
  p.dtype = dtype;
  p.dose = dtype == DType::U8 ? 800 : 5000;
  DectrisWriterOptions o;
  o.folder = folder;
  o.frames_per_file = 12;
  return write_simulated_acquisition(p, o, 2);
}

template <class T>
void mask_like_the_products(uint8_t* frame, uint64_t n, const std::vector<uint32_t>& bad) {
  T* px = reinterpret_cast<T*>(frame);
  for (uint64_t i = 0; i < n; ++i)
    if (px[i] == std::numeric_limits<T>::max()) px[i] = 0;
  for (uint32_t i : bad) px[i] = 0;
}

TEST(StoredChunks, EachChunkDecodedAndMaskedIsTheLoadedFrame) {
  for (DType dtype : {DType::U8, DType::U16, DType::U32}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    test::TempFolder dir("stored-chunks");
    const Acquisition acq = open_acquisition(write_chunks_demo(dtype, dir.str()));
    EXPECT_TRUE(serves_stored_chunks(acq));
    LoadRequest r;
    r.scan_shape = std::array<uint64_t, 2>{4, 5};
    const StemArray full = load_stem(acq, r);
    const StoredChunks s = read_stored_chunks(acq, 3, 15, uint64_t{1} << 30);  // across both data files
    ASSERT_EQ(s.entries.size(), 15u);
    EXPECT_EQ(s.files.size(), 2u);
    EXPECT_EQ(s.frame_bytes, 400u * acq.element_size);
    EXPECT_EQ(s.sentinel, unsigned_max(dtype));
    EXPECT_FALSE(s.bad_pixels.empty());
    std::vector<uint8_t> frame(s.frame_bytes), scratch;
    for (const StoredChunk& c : s.entries) {
      SCOPED_TRACE("frame " + std::to_string(c.frame));
      EXPECT_EQ(c.offset % 4, 0u);
      ASSERT_LE(c.offset + c.bytes, s.body.size());
      ASSERT_EQ(c.filter, StoredFilter::BitshuffleLz4);
      const auto* chunk = reinterpret_cast<const uint8_t*>(s.body.data()) + c.offset;
      EXPECT_EQ(c.block_bytes, (uint32_t{chunk[8]} << 24) | (uint32_t{chunk[9]} << 16) | (uint32_t{chunk[10]} << 8) | chunk[11]);
      decode_bitshuffle_lz4_chunk(chunk, c.bytes, s.element_size, frame.data(), frame.size(), "test", scratch);
      if (dtype == DType::U8) mask_like_the_products<uint8_t>(frame.data(), 400, s.bad_pixels);
      if (dtype == DType::U16) mask_like_the_products<uint16_t>(frame.data(), 400, s.bad_pixels);
      if (dtype == DType::U32) mask_like_the_products<uint32_t>(frame.data(), 400, s.bad_pixels);
      EXPECT_EQ(std::memcmp(frame.data(), full.data.get() + c.frame * s.frame_bytes, s.frame_bytes), 0);
    }
  }
}

TEST(StoredChunks, WindowsOutsideTheAcquisitionAndAByteBoundAreRefusedNamingTheFrames) {
  test::TempFolder dir("stored-chunks-bad");
  const Acquisition acq = open_acquisition(write_chunks_demo(DType::U16, dir.str()));
  const auto refused = [&](uint64_t start, uint64_t count, uint64_t max_bytes) -> std::string {
    try {
      read_stored_chunks(acq, start, count, max_bytes);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(refused(18, 3, 1 << 30).find("frames [18, 21) are not a non-empty window of the acquisition's 20 frames"), std::string::npos);
  EXPECT_NE(refused(20, 1, 1 << 30).find("frames [20, 21)"), std::string::npos);
  EXPECT_NE(refused(0, 0, 1 << 30).find("frames [0, 0)"), std::string::npos);
  const StoredChunks one = read_stored_chunks(acq, 0, 1, 1 << 30);
  const uint64_t first = (one.entries[0].bytes + 3) / 4 * 4;
  EXPECT_NE(refused(0, 5, first + 1).find("pass " + std::to_string(first + 1) + " bytes at frame 1: ask for fewer frames"), std::string::npos);
  EXPECT_EQ(read_stored_chunks(acq, 0, 1, first).entries.size(), 1u);
}

}  // namespace
}  // namespace tmorph
