// libFuzzer harness: the EMPAD sidecar parser (src/stem/formats/empad_xml.{h,cpp}) on the input as an .xml, then
// open_acquisition on it as `tensormorph stem inspect` opens one, beside a .raw of one frame (fz.raw: a seed naming
// it in raw_file@filename reaches the opener's size checks against the XML's scan).
// Seeds: tests/fuzz/corpus/empad (tests/fuzz/make_empad_seeds.py); dictionary: tests/fuzz/dict/empad.dict.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "stem/acquisition.h"
#include "stem/formats/empad_xml.h"
#include "tensormorph/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool raw_written = [] {
    const std::vector<uint8_t> frame(130 * 128 * 4, 0);
    tmorph::fuzz::write_file(tmorph::fuzz::scratch_dir() + "/fz.raw", frame.data(), frame.size());
    return true;
  }();
  (void)raw_written;
  try {
    const tmorph::EmpadXml x = tmorph::parse_empad_xml(data, size, "fz.xml");
    TM_FUZZ_CHECK(!x.raw_filename.empty());
    TM_FUZZ_CHECK(x.scan_x.has_value() == x.scan_y.has_value());
    TM_FUZZ_CHECK(x.scan_x || x.series_count);
    TM_FUZZ_CHECK(x.metadata.size() <= 4096);
    (void)x.metadata.dump();  // strict: throws on text that is not UTF-8
  } catch (const tmorph::Error& e) {
    if (tmorph::fuzz::verbose()) std::fprintf(stderr, "parser refused: %s\n", e.what());
  }
  const std::string path = tmorph::fuzz::scratch_dir() + "/fz.xml";
  tmorph::fuzz::write_file(path, data, size);
  try {
    const tmorph::Acquisition acq = tmorph::open_acquisition(path);
    TM_FUZZ_CHECK(acq.format == "empad");
    TM_FUZZ_CHECK(acq.frames_expected && acq.frames_present <= *acq.frames_expected && acq.frames_present <= 1);
    TM_FUZZ_CHECK(acq.detector_rows == 128 && acq.detector_cols == 128 && acq.element_size == 4);
    (void)acq.readiness_json().dump();
    (void)acq.metadata.dump();
    if (tmorph::fuzz::verbose()) std::fprintf(stderr, "opened: %s\n", acq.readiness_json().dump().c_str());
  } catch (const tmorph::Error& e) {
    if (tmorph::fuzz::verbose()) std::fprintf(stderr, "refused: %s\n", e.what());
  }
  return 0;
}
