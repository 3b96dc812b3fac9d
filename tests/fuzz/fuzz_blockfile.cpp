// libFuzzer harness: the NanoMegas blockfile reader (src/stem/formats/blockfile*.{h,cpp}) through open_acquisition,
// as `tensormorph stem inspect` opens a .blo file, then the first frames' bytes as the frame reader would read them.
// The input is the .blo file. Seeds: tests/fuzz/corpus/blockfile (tests/fuzz/make_blockfile_seeds.py).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "stem/acquisition.h"
#include "tensormorph/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = tmorph::fuzz::scratch_dir() + "/fz.blo";
  tmorph::fuzz::write_file(path, data, size);
  try {
    const tmorph::Acquisition acq = tmorph::open_acquisition(path);
    TM_FUZZ_CHECK(acq.format == "blockfile");
    TM_FUZZ_CHECK(acq.frames_expected && acq.frames_present <= *acq.frames_expected);
    TM_FUZZ_CHECK(acq.element_size == 1 || acq.element_size == 2);
    (void)acq.complete();
    (void)acq.readiness_json().dump();
    (void)acq.metadata.dump();
    if (tmorph::fuzz::verbose()) std::fprintf(stderr, "opened: %s\n", acq.readiness_json().dump().c_str());
    (void)tmorph::resolve_scan_shape(acq, std::nullopt);  // recorded by the header: never throws
    TM_FUZZ_CHECK(acq.parts.size() == 1 && acq.parts[0].records);
    const tmorph::FileRecords& r = *acq.parts[0].records;
    TM_FUZZ_CHECK(r.pixel_bytes == acq.detector_rows * acq.detector_cols * acq.element_size);
    // Present frames lie inside the input (so a frame buffer is bounded by it); a header may declare any detector.
    const uint64_t frames = std::min<uint64_t>(acq.parts[0].frames, 3);
    for (uint64_t i = 0; i < frames; ++i) TM_FUZZ_CHECK(r.offset + i * r.record_bytes + r.header_bytes + r.pixel_bytes <= size);
    std::vector<uint8_t> frame(frames ? r.pixel_bytes : 0);
    for (uint64_t i = 0; i < frames; ++i)
      if (r.unpack) r.unpack(data + r.offset + i * r.record_bytes + r.header_bytes, frame.data());
  } catch (const tmorph::Error& e) {
    if (tmorph::fuzz::verbose()) std::fprintf(stderr, "refused: %s\n", e.what());
  }
  return 0;
}
