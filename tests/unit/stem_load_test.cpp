// Loading 4D-STEM acquisitions: the full decode equals HDF5's; regions and bins equal slicing and
// summing the full decode (partial edge bins included); masking, dtype choice and narrowing, memory
// admission; and the readiness and errors of incomplete, damaged or half-written acquisitions.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/utf8.h"
#include "cpu/cpu_backend.h"
#include "formats/bitshuffle_lz4.h"
#include "stem/acquisition.h"
#include "stem/load.h"
#include "stem/products/products.h"
#include "stem/demo/simulate.h"
#include "stem_fixture.h"
#include "tensormorph/error.h"
#include "tensormorph/planner.h"

namespace tmorph {
namespace {

using test::TempFolder;
namespace fs = std::filesystem;

// A 6 x 9 scan (not square) of 20 x 20 uint16 frames over 3 data files, with dead pixels.
class StemLoad : public ::testing::Test {
 public:  // the corrupted-row helper below reads the fixture
  static constexpr uint64_t kRows = 6, kCols = 9, kK = 20;
  TempFolder dir{"load"};
  std::string master;

  void SetUp() override { master = write(DType::U16, dir.str()); }

  static std::string write(DType dtype, const std::string& folder, bool inline_data = false) {
    StemSimulationParams p;
    p.scan_rows = kRows;
    p.scan_cols = kCols;
    p.detector = kK;
    p.bf_radius_px = 4;
    p.dtype = dtype;
    p.dose = dtype == DType::U8 ? 800 : 5000;
    DectrisWriterOptions o;
    o.folder = folder;
    o.frames_per_file = 20;  // 20 + 20 + 14 frames
    o.inline_data = inline_data;
    return write_simulated_acquisition(p, o, 2);
  }

  LoadRequest base() const {
    LoadRequest r;
    r.scan_shape = std::array<uint64_t, 2>{kRows, kCols};
    r.threads = 2;
    return r;
  }

  // The full acquisition as HDF5 decodes it, one uint64 per pixel, bad pixels zeroed when masked.
  std::vector<uint64_t> reference(const Acquisition& acq, bool masked) const {
    std::vector<uint64_t> out;
    for (const auto& part : acq.parts) {
      const auto bytes = test::hdf5_decode(part.file, part.dataset, acq.element_size);
      for (size_t i = 0; i < bytes.size() / acq.element_size; ++i) {
        uint64_t v = 0;
        std::memcpy(&v, bytes.data() + i * acq.element_size, acq.element_size);
        const uint64_t sentinel = acq.element_size == 1 ? 0xFF : acq.element_size == 2 ? 0xFFFF : 0xFFFFFFFFull;
        if (masked && (v == sentinel || acq.pixel_mask[i % (kK * kK)] > 0)) v = 0;
        out.push_back(v);
      }
    }
    return out;
  }

  static uint64_t value(const StemArray& a, uint64_t i) {
    uint64_t v = 0;
    std::memcpy(&v, a.data.get() + i * dtype_size(a.dtype), dtype_size(a.dtype));
    return v;
  }

  // Brute-force region + bin over the reference, compared element by element.
  void expect_matches(const Acquisition& acq, const LoadRequest& r, const std::vector<uint64_t>& full) {
    const StemArray a = load_stem(acq, r);
    const Box s = r.scan_region.value_or(Box{0, kRows, 0, kCols});
    const Box d = r.detector_region.value_or(Box{0, kK, 0, kK});
    const auto cdiv = [](uint64_t x, uint64_t y) { return (x + y - 1) / y; };
    const std::array<uint64_t, 4> shape = {cdiv(s.r1 - s.r0, r.scan_bin[0]), cdiv(s.c1 - s.c0, r.scan_bin[1]),
                                           cdiv(d.r1 - d.r0, r.detector_bin[0]), cdiv(d.c1 - d.c0, r.detector_bin[1])};
    ASSERT_EQ(a.shape, shape);
    std::vector<uint64_t> expected(shape[0] * shape[1] * shape[2] * shape[3], 0);
    for (uint64_t sr = s.r0; sr < s.r1; ++sr)
      for (uint64_t sc = s.c0; sc < s.c1; ++sc)
        for (uint64_t k = d.r0; k < d.r1; ++k)
          for (uint64_t l = d.c0; l < d.c1; ++l) {
            const uint64_t o = (((sr - s.r0) / r.scan_bin[0] * shape[1] + (sc - s.c0) / r.scan_bin[1]) * shape[2] +
                                (k - d.r0) / r.detector_bin[0]) * shape[3] + (l - d.c0) / r.detector_bin[1];
            expected[o] += full[((sr * kCols + sc) * kK + k) * kK + l];
          }
    for (uint64_t i = 0; i < expected.size(); ++i) ASSERT_EQ(value(a, i), expected[i]) << "element " << i;
    EXPECT_EQ(a.provenance["output"]["shape"], nlohmann::json(shape));
  }
};

TEST_F(StemLoad, TheAcquisitionIsCompleteAndDescribed) {
  const Acquisition acq = open_acquisition(master);
  EXPECT_TRUE(acq.complete()) << acq.readiness_json().dump();
  EXPECT_EQ(acq.layout, "external-links");
  EXPECT_EQ(acq.parts.size(), 3u);
  EXPECT_EQ(acq.frames_present, kRows * kCols);
  EXPECT_EQ(acq.frames_expected, kRows * kCols);
  EXPECT_EQ(acq.detector_rows, kK);
  EXPECT_EQ(acq.dtype, DType::U16);
  EXPECT_EQ(acq.saturation_value, 65534u);
  EXPECT_DOUBLE_EQ(*acq.beam_energy_ev, 300e3);
  EXPECT_DOUBLE_EQ(*acq.convergence_semi_angle_mrad, 20);
  EXPECT_EQ(std::count_if(acq.pixel_mask.begin(), acq.pixel_mask.end(), [](uint32_t m) { return m > 0; }), 4);
  EXPECT_EQ(acq.metadata["entry/instrument/detector/count_time"]["units"], "s");
  EXPECT_EQ(acq.signature.size(), 16u);
  EXPECT_EQ(*acq.parts[1].image_nr_low, 21);
  // A data file, or the folder, opens the same acquisition through its master.
  EXPECT_EQ(open_acquisition(dir.file("demo_data_000002.h5")).master, acq.master);
  EXPECT_EQ(open_acquisition(dir.str()).signature, acq.signature);
}

TEST_F(StemLoad, FullDecodeWithoutMaskEqualsHdf5ByteForByte) {
  const Acquisition acq = open_acquisition(master);
  LoadRequest r = base();
  r.mask_bad_pixels = false;
  const StemArray a = load_stem(acq, r);
  ASSERT_EQ(a.dtype, DType::U16);
  const auto full = reference(acq, false);
  ASSERT_EQ(a.bytes, full.size() * 2);
  for (size_t i = 0; i < full.size(); ++i) ASSERT_EQ(value(a, i), full[i]) << i;
  EXPECT_EQ(a.provenance["bad_pixels"]["sentinel_values_zeroed"], 0);
}

TEST_F(StemLoad, MaskingZeroesDeadPixelsAndSentinels) {
  const Acquisition acq = open_acquisition(master);
  const StemArray a = load_stem(acq, base());
  const auto full = reference(acq, true);
  for (size_t i = 0; i < full.size(); ++i) ASSERT_EQ(value(a, i), full[i]) << i;
  EXPECT_EQ(a.provenance["bad_pixels"]["sentinel_values_zeroed"], 4 * kRows * kCols);  // the simulator's 4 dead pixels
  EXPECT_EQ(a.provenance["bad_pixels"]["pixel_mask_pixels"], 4);
}

TEST_F(StemLoad, RegionsAndBinsEqualSlicingAndSummingTheFullDecode) {
  const Acquisition acq = open_acquisition(master);
  const auto full = reference(acq, true);
  struct Case {
    std::optional<Box> scan, det;
    std::array<uint64_t, 2> sbin, dbin;
  };
  const std::vector<Case> cases = {
      {Box{1, 5, 2, 9}, std::nullopt, {1, 1}, {1, 1}},          // scan region only (frames across data files)
      {std::nullopt, Box{3, 17, 0, 20}, {1, 1}, {1, 1}},        // detector region
      {std::nullopt, std::nullopt, {2, 4}, {1, 1}},             // scan bin with partial edge bins (9 = 4+4+1)
      {std::nullopt, std::nullopt, {1, 1}, {3, 3}},             // detector bin, 20 = 3*6 + 2
      {Box{0, 5, 1, 8}, Box{2, 19, 5, 20}, {2, 3}, {4, 5}},     // everything at once
      {Box{5, 6, 8, 9}, std::nullopt, {7, 7}, {20, 20}},        // one frame summed to one number
  };
  for (const auto& c : cases) {
    LoadRequest r = base();
    r.scan_region = c.scan;
    r.detector_region = c.det;
    r.scan_bin = c.sbin;
    r.detector_bin = c.dbin;
    SCOPED_TRACE(nlohmann::json({c.sbin, c.dbin}).dump());
    expect_matches(acq, r, full);
  }
}

TEST_F(StemLoad, OnlyTheScanRegionsFramesAreRead) {
  const Acquisition acq = open_acquisition(master);
  LoadRequest r = base();
  r.scan_region = Box{2, 3, 0, 4};
  const StemArray a = load_stem(acq, r);
  EXPECT_EQ(a.decoded_bytes, 4 * kK * kK * 2);
}

TEST_F(StemLoad, OutputDtypeWidensForSumsAndNarrowsOnlyWhenEveryValueFits) {
  const Acquisition acq = open_acquisition(master);
  LoadRequest r = base();
  EXPECT_EQ(load_stem(acq, r).dtype, DType::U16);  // no bins: the source dtype
  r.detector_bin = {2, 2};
  const StemArray wide = load_stem(acq, r);
  EXPECT_EQ(wide.dtype, DType::U32);  // 4 × 65534 needs 32 bits
  EXPECT_TRUE(wide.provenance["output"]["narrowed_from"].is_null());
  r.dtype = "uint16";  // permission to narrow: the simulated counts fit
  const StemArray narrow = load_stem(acq, r);
  EXPECT_EQ(narrow.dtype, DType::U16);
  EXPECT_EQ(narrow.provenance["output"]["narrowed_from"], "u32");
  for (uint64_t i = 0; i < narrow.bytes / 2; ++i) ASSERT_EQ(value(narrow, i), value(wide, i));
  r.dtype = "uint8";
  r.scan_bin = {6, 9};  // a sum over every frame exceeds 255
  try {
    load_stem(acq, r);
    FAIL() << "narrowing to uint8 should have been refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
    EXPECT_NE(std::string(e.what()).find("does not fit; nothing was narrowed"), std::string::npos) << e.what();
  }
}

TEST_F(StemLoad, Uint32SourcesNarrowToUint16OnlyWhenAsked) {
  TempFolder d32("u32");
  const Acquisition acq = open_acquisition(write(DType::U32, d32.str()));
  LoadRequest r = base();
  const StemArray a = load_stem(acq, r);
  EXPECT_EQ(a.dtype, DType::U32);
  EXPECT_EQ(a.provenance["bad_pixels"]["sentinel_values_zeroed"], 4 * kRows * kCols);  // 0xFFFFFFFF zeroed
  r.dtype = "uint16";
  const StemArray n = load_stem(acq, r);
  EXPECT_EQ(n.dtype, DType::U16);
  EXPECT_EQ(n.provenance["output"]["narrowed_from"], "u32");
  for (uint64_t i = 0; i < n.bytes / 2; ++i) ASSERT_EQ(value(n, i), value(a, i));
}

TEST_F(StemLoad, InlineLayoutReadsTheSame) {
  TempFolder d2("inline");
  const Acquisition ext = open_acquisition(master);
  const Acquisition inl = open_acquisition(write(DType::U16, d2.str(), true));
  EXPECT_EQ(inl.layout, "inline");
  const StemArray a = load_stem(ext, base()), b = load_stem(inl, base());
  ASSERT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(std::memcmp(a.data.get(), b.data.get(), a.bytes), 0);
}

TEST_F(StemLoad, MemoryAdmissionRefusesBeforeAllocatingAndNamesTheLadder) {
  const Acquisition acq = open_acquisition(master);
  LoadRequest r = base();
  r.threads = 1;
  r.memory_budget = 20000;  // the full load needs 43,200 bytes of output plus working buffers
  try {
    load_stem(acq, r);
    FAIL() << "expected the memory budget to refuse";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::PrecisionRefused);
    const std::string m = e.what();
    for (const char* s : {"over the memory budget", "nothing was allocated, cropped or binned", "crop: --scan-region 0,", "bin: --scan-bin",
                          "bin: --detector-bin", "product-first"})
      EXPECT_NE(m.find(s), std::string::npos) << s << " in:\n" << m;
  }
}

TEST_F(StemLoad, ScanShapeMustCoverTheFrames) {
  const Acquisition acq = open_acquisition(master);
  LoadRequest r = base();
  r.scan_shape.reset();
  EXPECT_EQ(load_stem(acq, r).shape[1], kCols);  // the simulator records its scan shape
  r.scan_shape = std::array<uint64_t, 2>{5, 11};
  try {
    load_stem(acq, r);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
  }
  r.scan_shape = std::array<uint64_t, 2>{9, 6};  // the other way round is a valid 9 x 6 scan
  EXPECT_EQ(load_stem(acq, r).shape[0], 9u);
  // Without a recorded shape: a square frame count is a square scan, anything else needs --scan-shape.
  for (const uint64_t frames : {6u, 4u}) {
    TempFolder d("noshape");
    DectrisWriterOptions o;
    o.folder = d.str();
    const Acquisition plain = open_acquisition(test::write_frames(o, DType::U16, 8, 8, frames));
    if (frames == 4) {
      EXPECT_EQ(resolve_scan_shape(plain, std::nullopt), (std::array<uint64_t, 2>{2, 2}));
      continue;
    }
    try {
      resolve_scan_shape(plain, std::nullopt);
      FAIL();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::InvalidArgument);
      EXPECT_NE(std::string(e.what()).find("pass --scan-shape ROWS,COLS"), std::string::npos);
    }
  }
}

TEST_F(StemLoad, BadRegionsAndBinsAreInvalidArguments) {
  const Acquisition acq = open_acquisition(master);
  for (const Box b : {Box{0, 7, 0, 9}, Box{3, 3, 0, 9}, Box{0, 6, 5, 2}}) {
    LoadRequest r = base();
    r.scan_region = b;
    EXPECT_THROW(load_stem(acq, r), Error);
  }
  LoadRequest r = base();
  r.detector_bin = {0, 1};
  EXPECT_THROW(load_stem(acq, r), Error);
}

// ---- Incomplete and damaged acquisitions

TEST_F(StemLoad, AMissingDataFileIsReportedAndOnlyItsFramesFail) {
  fs::remove(dir.file("demo_data_000002.h5"));
  const Acquisition acq = open_acquisition(master);
  EXPECT_FALSE(acq.complete());
  const std::string report = acq.readiness_json().dump();
  EXPECT_NE(report.find("data_000002 links to " + dir.file("demo_data_000002.h5") + ", which does not exist"), std::string::npos) << report;
  EXPECT_NE(report.find("34 of 54 frames present"), std::string::npos) << report;
  LoadRequest r = base();
  r.scan_region = Box{0, 2, 0, 2};  // frames 0, 1, 9, 10: all in data file 1
  EXPECT_NO_THROW(load_stem(acq, r));
  r.scan_region = Box{2, 3, 0, 9};  // frames 18..26 reach data file 2
  try {
    load_stem(acq, r);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("frame 20 is not present in any readable data file"), std::string::npos) << e.what();
  }
}

TEST_F(StemLoad, ATruncatedDataFileIsNamed) {
  const std::string f = dir.file("demo_data_000003.h5");
  fs::resize_file(f, fs::file_size(f) / 2);
  const Acquisition acq = open_acquisition(master);
  EXPECT_FALSE(acq.complete());
  const std::string report = acq.readiness_json().dump();
  EXPECT_NE(report.find(f), std::string::npos) << report;
  EXPECT_NE(report.find("truncated"), std::string::npos) << report;
  LoadRequest r = base();
  r.scan_region = Box{5, 6, 0, 9};
  EXPECT_THROW(load_stem(acq, r), Error);
}

// Loads the first scan row after corrupting frame 3 with `load` and returns the error it raised ("" if none).
template <class Load>
std::string error_of_corrupted_row(StemLoad& t, Load load) {
  test::corrupt_stored_frame(t.dir.file("demo_data_000001.h5"), 3);
  const Acquisition acq = open_acquisition(t.master);
  LoadRequest r = t.base();
  r.scan_region = Box{0, 1, 0, 9};
  try {
    load(acq, r);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    return e.what();
  }
  return {};
}

TEST_F(StemLoad, ACorruptedChunkNamesFileFrameAndBlock) {
  const std::string what = error_of_corrupted_row(*this, [](const Acquisition& acq, const LoadRequest& r) { load_stem(acq, r); });
  EXPECT_NE(what.find(dir.file("demo_data_000001.h5") + ", frame 3: bitshuffle/LZ4 chunk: block 0 (chunk byte 12)"), std::string::npos)
      << what;
}

TEST_F(StemLoad, AChunkLargerThanAnyEncodingOfItsFrameIsRefusedBeforeAllocating) {
  const std::string f = dir.file("demo_data_000002.h5");
  {
    auto guard = h5::lock();
    h5::Handle file(H5Fopen(f.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    h5::Handle ds(H5Dopen2(file.get(), "entry/data/data", H5P_DEFAULT), H5Dclose);
    const std::vector<uint8_t> huge(200000, 0x11);  // a 20 x 20 uint16 frame is 800 bytes
    const hsize_t coord[3] = {2, 0, 0};
    ASSERT_GE(H5Dwrite_chunk(ds.get(), H5P_DEFAULT, 0, coord, huge.size(), huge.data()), 0);
  }
  const Acquisition acq = open_acquisition(master);
  LoadRequest r = base();
  r.scan_region = Box{2, 3, 0, 9};  // frames 18..26: frame 22 is local frame 2 of data file 2
  try {
    load_stem(acq, r);
    FAIL() << "the oversized chunk was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find(f + ": frame 22: the chunk index says 200000 stored bytes for a 800-byte frame"), std::string::npos)
        << e.what();
  }
}

// The probe's bitshuffle finding, the filter's side: a chunk whose header names another block size than the
// dataset's bitshuffle options (cd_values[3]) is damaged, even where its blocks would decode.
TEST(StemDamagedChunk, AHeaderBlockSizeThatDisagreesWithTheFilterOptionsIsNamed) {
  TempFolder folder("block-size");
  DectrisWriterOptions o;
  o.folder = folder.str();
  o.block_elements = 128;  // cd_values[3] = 128: blocks of 256 bytes of uint16
  const std::string master = test::write_frames(o, DType::U16, 20, 20, 4);
  const std::string data = folder.file("demo_data_000001.h5");
  {
    auto guard = h5::lock();
    h5::Handle file(H5Fopen(data.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    h5::Handle ds(H5Dopen2(file.get(), "entry/data/data", H5P_DEFAULT), H5Dclose);
    const auto pixels = test::detector_pixels(DType::U16, 400, 77);
    const auto chunk = encode_bitshuffle_lz4_chunk(pixels.data(), 400, 2, 256);  // a valid chunk, blocks of 512 bytes
    const hsize_t coord[3] = {1, 0, 0};
    ASSERT_GE(H5Dwrite_chunk(ds.get(), H5P_DEFAULT, 0, coord, chunk.size(), chunk.data()), 0);
  }
  const Acquisition acq = open_acquisition(master);
  LoadRequest r;
  r.scan_shape = std::array<uint64_t, 2>{2, 2};
  try {
    load_stem(acq, r);
    FAIL() << "the chunk was decoded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find(data + ": frame 1: the chunk's header (byte 8) says blocks of 512 bytes, the dataset's "
                                                "bitshuffle filter options say 128 elements (256 bytes)"),
              std::string::npos)
        << e.what();
  }
  r.scan_region = Box{1, 2, 0, 2};  // frames 2 and 3 are intact
  EXPECT_NO_THROW(load_stem(acq, r));
}

TEST(StemReadiness, AnAcquisitionStillBeingWrittenIsReportedAndUnwrittenFramesFail) {
  TempFolder dir("writing");
  DectrisWriterOptions o;
  o.folder = dir.str();
  o.frames_per_file = 10;
  DectrisMetadata meta;
  meta.scalars["entry/instrument/detector/detectorSpecific/ntrigger"] = {{"value", 30}};
  meta.scalars["entry/instrument/detector/detectorSpecific/nimages"] = {{"value", 1}};
  {
    // 30 frames announced; the writer has created two data files so far and written 15 frames.
    DectrisWriter w(o, DType::U16, 8, 8, 20, meta);
    for (uint64_t f = 0; f < 15; ++f) w.write_frame(f, test::detector_pixels(DType::U16, 64, f).data());
  }
  const Acquisition acq = open_acquisition(dir.file("demo_master.h5"));
  EXPECT_FALSE(acq.complete());
  EXPECT_NE(acq.readiness_json().dump().find("20 of 30 frames present"), std::string::npos) << acq.readiness_json().dump();
  LoadRequest r;
  r.scan_shape = std::array<uint64_t, 2>{5, 6};
  r.scan_region = Box{0, 2, 0, 6};  // frames 0..11: written
  EXPECT_NO_THROW(load_stem(acq, r));
  r.scan_region = Box{2, 3, 0, 6};  // frames 12..17: 15..17 not written yet
  try {
    load_stem(acq, r);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("frame 15 (local 5) has no stored chunk: not written yet"), std::string::npos) << e.what();
  }
}

TEST(StemReadiness, ADanglingLinkAndAMissingGroupAreReported) {
  TempFolder dir("dangling");
  DectrisWriterOptions o;
  o.folder = dir.str();
  const std::string master = test::write_frames(o, DType::U16, 8, 8, 4);
  {
    auto guard = h5::lock();
    h5::Handle f(H5Fopen(master.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    ASSERT_GE(H5Lcreate_external("demo_data_000001.h5", "/entry/data/nothing", f.get(), "entry/data/data_000002", H5P_DEFAULT, H5P_DEFAULT), 0);
  }
  const Acquisition acq = open_acquisition(master);
  EXPECT_NE(acq.readiness_json().dump().find("data_000002 points nowhere"), std::string::npos) << acq.readiness_json().dump();
  const std::string not_stem = dir.file("plain.h5");
  {
    auto guard = h5::lock();
    h5::Handle f(H5Fcreate(not_stem.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  }
  try {
    open_acquisition(not_stem);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::BadInput);
    EXPECT_NE(std::string(e.what()).find("no group entry/data"), std::string::npos);
  }
  std::ofstream(dir.file("junk_master.h5")) << "not hdf5";
  EXPECT_THROW(open_acquisition(dir.file("junk_master.h5")), Error);
}

// Found by tests/fuzz/fuzz_dectris: HDF5 strings and names are bytes, and a file may hold Latin-1 where
// JSON needs UTF-8. The reader put them in its JSON as they were, and every dump() of it (stem inspect
// --json) threw nlohmann's type_error 316 instead of printing. Now they are valid UTF-8: a byte that starts
// no UTF-8 sequence is written \xNN (escape_invalid_utf8), so nothing is lost.
TEST(StemReadiness, StringsAndNamesThatAreNotUtf8BecomeUtf8InTheJson) {
  TempFolder dir("latin1");
  DectrisWriterOptions o;
  o.folder = dir.str();
  const std::string master = test::write_frames(o, DType::U16, 8, 8, 4);
  {
    auto guard = h5::lock();
    h5::Handle f(H5Fopen(master.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    h5::Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    const std::string text = "Eiger \xb5-STEM \xff";  // Latin-1 micro sign, and a byte no UTF-8 has
    h5::Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type.get(), text.size());
    h5::Handle scalar(H5Screate(H5S_SCALAR), H5Sclose);
    for (const char* path : {"entry/instrument/detector/description", "entry/instrument/caf\xe9/x"}) {
      h5::Handle ds(H5Dcreate2(f.get(), path, type.get(), scalar.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
      ASSERT_TRUE(ds.valid()) << path;
      ASSERT_GE(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()), 0);
      h5::Handle units(H5Acreate2(ds.get(), "units", type.get(), scalar.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
      ASSERT_GE(H5Awrite(units.get(), type.get(), text.data()), 0);
    }
    ASSERT_GE(H5Lcreate_external("missing_\xff.h5", "/entry/data/data", f.get(), "entry/data/data_000009", H5P_DEFAULT, H5P_DEFAULT), 0);
  }
  const Acquisition acq = open_acquisition(master);
  const std::string escaped = "Eiger \\xB5-STEM \\xFF";
  EXPECT_EQ(acq.description, escaped);
  std::string metadata, readiness;
  ASSERT_NO_THROW(metadata = acq.metadata.dump());
  ASSERT_NO_THROW(readiness = acq.readiness_json().dump());
  EXPECT_EQ(acq.metadata.at("entry/instrument/detector/description").at("units"), escaped) << metadata;
  EXPECT_TRUE(acq.metadata.contains("entry/instrument/caf\\xE9/x")) << metadata;
  EXPECT_NE(readiness.find("missing_\\\\xFF.h5"), std::string::npos) << readiness;  // the backslash, escaped by dump
  EXPECT_EQ(escape_invalid_utf8("ok \xc3\xa9 \xf0\x9f\x99\x82"), "ok \xc3\xa9 \xf0\x9f\x99\x82");  // valid UTF-8 is kept
  EXPECT_EQ(escape_invalid_utf8("\xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82"),  // overlong, surrogate, > U+10FFFF, cut
            "\\xC0\\xAF \\xED\\xA0\\x80 \\xF4\\x90\\x80\\x80 \\xE2\\x82");
}

// Found by tests/fuzz/fuzz_dectris: a metadata dataset's "units" attribute holding several strings was read
// whole into room for one (H5Aread writes every element): a stack overflow (variable-length strings, 8
// bytes per string over one pointer) or a heap overflow (fixed-length). Units are one string or ignored.
TEST(StemReadiness, AUnitsAttributeOfManyStringsIsIgnored) {
  TempFolder dir("units");
  DectrisWriterOptions o;
  o.folder = dir.str();
  const std::string master = test::write_frames(o, DType::U16, 8, 8, 4);
  {
    auto guard = h5::lock();
    h5::Handle f(H5Fopen(master.c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    h5::Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    h5::Handle scalar(H5Screate(H5S_SCALAR), H5Sclose);
    const hsize_t many = 1000;  // 8 KB of pointers over a stack slot of 8 bytes; attributes stay under 64 KiB
    h5::Handle list(H5Screate_simple(1, &many, nullptr), H5Sclose);
    h5::Handle variable(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(variable.get(), H5T_VARIABLE);
    h5::Handle fixed(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(fixed.get(), 8);
    const double value = 2.5;
    const std::vector<const char*> strings(many, "keV");
    const std::vector<char> bytes(many * 8, 'k');
    for (const auto& [path, type] : {std::pair{"entry/instrument/beam/incident_energy", variable.get()},
                                     std::pair{"entry/instrument/beam/convergence_semi_angle", fixed.get()}}) {
      h5::Handle ds(H5Dcreate2(f.get(), path, H5T_NATIVE_DOUBLE, scalar.get(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
      ASSERT_TRUE(ds.valid()) << path;
      ASSERT_GE(H5Dwrite(ds.get(), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, &value), 0);
      h5::Handle units(H5Acreate2(ds.get(), "units", type, list.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
      ASSERT_GE(H5Awrite(units.get(), type, type == variable.get() ? static_cast<const void*>(strings.data()) : bytes.data()), 0);
    }
  }
  const Acquisition acq = open_acquisition(master);
  EXPECT_EQ(acq.beam_energy_ev, 2.5);
  EXPECT_EQ(acq.convergence_semi_angle_mrad, 2.5);
  EXPECT_FALSE(acq.metadata.at("entry/instrument/beam/incident_energy").contains("units")) << acq.metadata.dump();
  EXPECT_FALSE(acq.metadata.at("entry/instrument/beam/convergence_semi_angle").contains("units")) << acq.metadata.dump();
}

// Found by tests/fuzz/fuzz_dectris: HDF5 declares extents without storing them, so a master of a few KB
// can claim (1, 65536, 65536) frames and a pixel mask of the same shape; opening it allocated and filled
// the whole mask (16 GiB there; with 2^32 x 2^32 the size wrapped to 0). A mask beyond 2^26 pixels is now
// a problem and not read. 8193 x 8193 is just over: 256 MiB read before the fix, nothing after.
TEST(StemReadiness, APixelMaskLargerThanAnyDetectorIsNotRead) {
  TempFolder dir("hugemask");
  const std::string master = dir.file("huge_master.h5");
  {
    auto guard = h5::lock();
    h5::Handle f(H5Fcreate(master.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
    h5::Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
    H5Pset_create_intermediate_group(lcpl.get(), 1);
    const hsize_t frames[3] = {1, 8193, 8193}, frame_chunk[3] = {1, 64, 64}, mask_chunk[2] = {64, 64};
    h5::Handle frames_space(H5Screate_simple(3, frames, nullptr), H5Sclose);
    h5::Handle mask_space(H5Screate_simple(2, frames + 1, nullptr), H5Sclose);
    h5::Handle frames_dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose), mask_dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(frames_dcpl.get(), 3, frame_chunk);
    H5Pset_chunk(mask_dcpl.get(), 2, mask_chunk);
    h5::Handle data(H5Dcreate2(f.get(), "entry/data/data", H5T_STD_U16LE, frames_space.get(), lcpl.get(), frames_dcpl.get(), H5P_DEFAULT),
                    H5Dclose);
    h5::Handle mask(H5Dcreate2(f.get(), "entry/instrument/detector/pixel_mask", H5T_STD_U32LE, mask_space.get(), lcpl.get(),
                               mask_dcpl.get(), H5P_DEFAULT),
                    H5Dclose);
    ASSERT_TRUE(data.valid() && mask.valid());
  }
  ASSERT_LT(std::filesystem::file_size(master), 64u << 10);
  const Acquisition acq = open_acquisition(master);
  EXPECT_EQ(acq.detector_rows, 8193u);
  EXPECT_TRUE(acq.pixel_mask.empty());
  EXPECT_TRUE(acq.pixel_mask_path.empty());
  bool named = false;
  for (const auto& p : acq.problems) named = named || p.find("pixel mask of 8193x8193 pixels is larger than any detector") != std::string::npos;
  EXPECT_TRUE(named) << acq.readiness_json().dump();
}

TEST(StemSimulation, FramesAreDeterministicAndThePhysicsIsVisible) {
  StemSimulationParams p;
  p.scan_rows = p.scan_cols = 4;
  p.detector = 32;
  StemSimulator a(p), b(p);
  std::vector<uint8_t> fa(32 * 32 * 2), fb(32 * 32 * 2);
  a.frame(5, fa.data());
  b.frame(5, fb.data());
  EXPECT_EQ(fa, fb);
  // Most counts fall inside the bright-field disk (radius K/8 = 4 px around the centre).
  const auto* px = reinterpret_cast<const uint16_t*>(fa.data());
  uint64_t inside = 0, total = 0;
  for (int u = 0; u < 32; ++u)
    for (int v = 0; v < 32; ++v) {
      const uint16_t c = px[u * 32 + v] == 0xFFFF ? 0 : px[u * 32 + v];
      total += c;
      if ((u - 16) * (u - 16) + (v - 16) * (v - 16) <= 25) inside += c;
    }
  EXPECT_GT(total, 15000u);
  EXPECT_GT(inside, total * 8 / 10);
  EXPECT_NEAR(electron_wavelength_A(300e3), 0.019687, 1e-5);
  EXPECT_NEAR(electron_wavelength_A(200e3), 0.025079, 1e-5);
}

// Decoding placed on a GPU backend (gpuemu: the CUDA/HIP kernel source under the host grid emulation) gives
// the bytes the CPU path gives, for whole frames, crops, bins and unmasked loads, reported in the provenance.
struct GpuemuDecode {
  BackendRegistry registry;
  CostModel costs;
  GpuemuDecode() {
    registry.register_table(cpu::cpu_backend_table(), "static");
    registry.load_plugins_from(TM_GPUEMU_PLUGIN_DIR);
  }
  Planner planner() const {
    Constraints c;
    c.strict_backend = "gpuemu";
    return Planner(registry, costs, c);
  }
  std::vector<uint8_t> load(const Acquisition& acq, const LoadRequest& r, nlohmann::json* provenance = nullptr) const {
    StemLoader loader(acq, r);
    const auto at = place_decode(acq, loader, planner());
    EXPECT_TRUE(at && at->backend == "gpuemu");
    std::vector<uint8_t> out(loader.positions() * loader.position_bytes());
    loader.fill(0, loader.positions(), out.data());
    if (provenance) *provenance = loader.provenance();
    return out;
  }
};

TEST_F(StemLoad, DecodingPlacedOnAGpuBackendGivesTheSameBytes) {
  const GpuemuDecode gpu;
  const Acquisition acq = open_acquisition(master);
  std::vector<LoadRequest> requests(4, base());
  requests[1].detector_bin = {2, 2}, requests[1].scan_bin = {2, 1};
  requests[2].scan_region = Box{1, 5, 2, 8}, requests[2].detector_region = Box{3, 17, 0, 20};
  requests[3].mask_bad_pixels = false;
  for (size_t i = 0; i < requests.size(); ++i) {
    const StemArray cpu = load_stem(acq, requests[i]);
    nlohmann::json provenance;
    const std::vector<uint8_t> placed = gpu.load(acq, requests[i], &provenance);
    ASSERT_EQ(placed.size(), cpu.bytes) << "request " << i;
    EXPECT_EQ(std::memcmp(placed.data(), cpu.data.get(), cpu.bytes), 0) << "request " << i;
    EXPECT_EQ(provenance["backend"], "gpuemu");
    EXPECT_EQ(provenance["bad_pixels"]["sentinel_values_zeroed"], cpu.provenance["bad_pixels"]["sentinel_values_zeroed"]);
  }
}

TEST_F(StemLoad, ACorruptedChunkDecodedOnAGpuBackendNamesFileFrameAndBlock) {
  const std::string what =
      error_of_corrupted_row(*this, [](const Acquisition& acq, const LoadRequest& r) { GpuemuDecode().load(acq, r); });
  EXPECT_NE(what.find(dir.file("demo_data_000001.h5") + ", frame 3: bitshuffle/LZ4 chunk: block 0 (chunk byte 12)"), std::string::npos)
      << what;
  EXPECT_NE(what.find("(decoded on gpuemu)"), std::string::npos) << what;
}

// 4D-STEM products with decoding and both product ops on one device: each batch of frames is decoded into
// device memory, masked there, and read there by stem.frame_sums and stem.pattern_reduce. Every number equals
// the CPU's; the provenance says the frames stayed on the device. Binned frames are made on the host, so
// that request is not resident, and says why, with the same numbers.
ProductRequest products_request(const LoadRequest& load) {
  ProductRequest req;
  req.load = load;
  req.detectors = {{0, 1, 21, 210, 399}, std::vector<uint32_t>()};
  for (uint32_t p = 0; p < 300; ++p) req.detectors[1].push_back(p);  // dense: total - complement
  req.pattern = true;
  req.batch_bytes = 4 * StemLoad::kK * StemLoad::kK * 2;  // 4 frames a batch: 14 batches, the last partial
  return req;
}

void expect_same_products(const ProductResult& a, const ProductResult& b, const std::string& what) {
  EXPECT_EQ(a.totals, b.totals) << what;
  EXPECT_EQ(a.com_weight, b.com_weight) << what;
  EXPECT_EQ(a.com_row, b.com_row) << what;
  EXPECT_EQ(a.com_col, b.com_col) << what;
  EXPECT_EQ(a.images, b.images) << what;
  EXPECT_EQ(a.pattern_sum, b.pattern_sum) << what;
  EXPECT_EQ(a.pattern_max, b.pattern_max) << what;
  EXPECT_EQ(a.load_provenance["bad_pixels"]["sentinel_values_zeroed"], b.load_provenance["bad_pixels"]["sentinel_values_zeroed"])
      << what;
}

TEST_F(StemLoad, ProductsReadFramesDecodedOnTheDevice) {
  const GpuemuDecode gpu;
  const Acquisition acq = open_acquisition(master);
  Constraints on_cpu;
  on_cpu.strict_backend = "cpu";
  for (bool masked : {true, false}) {
    LoadRequest load = base();
    load.mask_bad_pixels = masked;
    const ProductRequest req = products_request(load);
    const ProductResult cpu = compute_products_here(acq, req, Planner(gpu.registry, gpu.costs, on_cpu));
    const ProductResult dev = compute_products_here(acq, req, gpu.planner());
    expect_same_products(dev, cpu, masked ? "masked" : "unmasked");
    const nlohmann::json& f = dev.load_provenance["frames_on_device"];
    EXPECT_EQ(f["resident"], true) << f.dump();
    EXPECT_EQ(f["batches_decoded_there"], 14) << f.dump();
    EXPECT_EQ(f["batches_decoded_here"], 0) << f.dump();
    for (const Placement& p : dev.placements)  // what crossed: the chunks up, the sums back, no frames
      if (p.op == "decode.bitshuffle_lz4") EXPECT_GT(p.bytes_transferred, 0u);
      else EXPECT_EQ(p.bytes_transferred, 0u) << p.op;
    EXPECT_EQ(cpu.load_provenance["frames_on_device"]["resident"], false);
    if (masked) {
      EXPECT_GT(cpu.load_provenance["bad_pixels"]["sentinel_values_zeroed"].get<uint64_t>(), 0u);
    }
  }
  LoadRequest binned = base();
  binned.detector_bin = {2, 2};
  ProductRequest req = products_request(binned);
  req.detectors = {{0, 1, 21}};
  const ProductResult cpu = compute_products_here(acq, req, Planner(gpu.registry, gpu.costs, on_cpu));
  const ProductResult dev = compute_products_here(acq, req, gpu.planner());
  expect_same_products(dev, cpu, "binned");
  EXPECT_EQ(dev.load_provenance["frames_on_device"]["resident"], false);
  EXPECT_NE(dev.load_provenance["frames_on_device"]["why"].get<std::string>().find("binned"), std::string::npos);
}

TEST_F(StemLoad, ACorruptedChunkDecodedIntoDeviceMemoryNamesFileFrameAndBlock) {
  const std::string what = error_of_corrupted_row(*this, [](const Acquisition& acq, const LoadRequest& r) {
    const GpuemuDecode gpu;
    compute_products_here(acq, products_request(r), gpu.planner());
  });
  EXPECT_NE(what.find(dir.file("demo_data_000001.h5") + ", frame 3: bitshuffle/LZ4 chunk: block 0 (chunk byte 12)"), std::string::npos)
      << what;
  EXPECT_NE(what.find("(decoded on gpuemu)"), std::string::npos) << what;
}

// LoadRequest.progress: called after each batch with a running count that only grows, ending at every frame read (the
// scan region's), on one thread or several; without a callback nothing changes.
TEST_F(StemLoad, ProgressCountsEveryFrameReadOnceAndEndsAtTheTotal) {
  const Acquisition acq = open_acquisition(master);
  for (unsigned threads : {1u, 3u}) {
    LoadRequest r = base();
    r.threads = threads;
    r.scan_region = Box{1, kRows, 0, kCols - 1};
    const uint64_t total = (kRows - 1) * (kCols - 1);
    std::vector<std::pair<uint64_t, uint64_t>> calls;
    r.progress = [&](uint64_t done, uint64_t all) { calls.emplace_back(done, all); };
    const StemArray a = load_stem(acq, r);
    ASSERT_FALSE(calls.empty());
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i].second, total) << i;
      if (i) {
        EXPECT_GT(calls[i].first, calls[i - 1].first) << "threads " << threads << ", call " << i;
      }
    }
    EXPECT_EQ(calls.back().first, total) << "threads " << threads;
    r.progress = nullptr;
    const StemArray b = load_stem(acq, r);
    ASSERT_EQ(a.bytes, b.bytes);
    EXPECT_EQ(std::memcmp(a.data.get(), b.data.get(), a.bytes), 0);
  }
}

}  // namespace
}  // namespace tmorph
