// libFuzzer harness: the Merlin .mib reader (src/stem/formats/mib*.h) through open_acquisition, as `tensormorph stem
// inspect` opens a file, then the decoding of the first frames as the frame reader would (FileRecords::unpack).
//
// Input layout: byte 0 chooses what is written and what is opened (bit 0: a .hdr beside the .mib; bits 1-2: open
// the .mib, the .hdr, or the folder); with a .hdr, bytes 1-2 (little-endian) are its length, its text follows; the
// rest is the .mib file. Seeds: tests/fuzz/corpus/mib (tests/fuzz/make_mib_seeds.py).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "stem/acquisition.h"
#include "tensormorph/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t flags = data[0];
  size_t at = 1;
  const std::string dir = tmorph::fuzz::scratch_dir();
  const std::string mib = dir + "/fz.mib", hdr = dir + "/fz.hdr";
  std::remove(hdr.c_str());
  if (flags & 1) {
    if (size < 3) return 0;
    const size_t n = std::min<size_t>(data[1] | (size_t{data[2]} << 8), size - 3);
    tmorph::fuzz::write_file(hdr, data + 3, n);
    at = 3 + n;
  }
  tmorph::fuzz::write_file(mib, data + at, size - at);
  const int open_as = (flags >> 1) & 3;
  const std::string path = open_as == 1 ? hdr : open_as == 2 ? dir : mib;
  try {
    const tmorph::Acquisition acq = tmorph::open_acquisition(path);
    TM_FUZZ_CHECK(acq.format == "mib");
    TM_FUZZ_CHECK(acq.frames_present <= acq.frames_extent);
    TM_FUZZ_CHECK(acq.element_size == 1 || acq.element_size == 2 || acq.element_size == 4);
    (void)acq.complete();
    (void)acq.readiness_json().dump();
    (void)acq.metadata.dump();
    if (tmorph::fuzz::verbose()) std::fprintf(stderr, "opened: %s\n", acq.readiness_json().dump().c_str());
    try {
      (void)tmorph::resolve_scan_shape(acq, std::nullopt);
    } catch (const tmorph::Error&) {
    }
    // Decode the first frames from the input's own bytes, as the frame reader does with pread.
    TM_FUZZ_CHECK(acq.parts.size() == 1 && acq.parts[0].records);
    const tmorph::FileRecords& r = *acq.parts[0].records;
    const size_t file_bytes = size - at;
    // Present frames lie inside the input, so the frame buffer is allocated only when one is there to decode.
    const uint64_t frames = std::min<uint64_t>(acq.parts[0].frames, 3);
    for (uint64_t i = 0; i < frames; ++i) TM_FUZZ_CHECK(r.offset + i * r.record_bytes + r.header_bytes + r.pixel_bytes <= file_bytes);
    std::vector<uint8_t> frame(frames ? acq.detector_rows * acq.detector_cols * acq.element_size : 0);
    for (uint64_t i = 0; i < frames; ++i)
      if (r.unpack) r.unpack(data + at + r.offset + i * r.record_bytes + r.header_bytes, frame.data());
  } catch (const tmorph::Error& e) {
    if (tmorph::fuzz::verbose()) std::fprintf(stderr, "refused: %s\n", e.what());
  }
  return 0;
}
