// The EMPAD sidecar (.xml) of a 4D-STEM acquisition: which .raw file holds the frames and the scan's shape, with
// every other element kept as metadata. The layout, as the EMPAD acquisition software writes it and as the peers'
// readers (rosettasciio's empad reader, LiberTEM's and py4DSTEM's read_empad) read it:
//   <root>
//     <raw_file filename="…/scan_x256_y256.raw"/>        the frames (a path of the acquiring machine: its basename
//                                                         is looked up beside the .xml)
//     <pix_x>256</pix_x> <pix_y>256</pix_y>              scan columns (fast) and rows
//     <scan_parameters mode="acquire">                  (one per mode: search, acquire; a mode other than
//                                                         acquire is kept as root/scan_parameters[mode=search])
//       <scan_resolution_x>…</scan_resolution_x> …       the same, where pix_x/pix_y are absent
//       <series_count>…</series_count>                    a time series of frames instead of a 2-D scan
//     </scan_parameters>
//     <iom_measurements>…</iom_measurements>               microscope readings (metadata; empad_calibration.h
//                                                         turns some into calibration)
//   </root>
// Values may be written quoted ('256'). The parser reads a well-formed subset of XML 1.0: elements, attributes,
// text, comments, processing instructions, CDATA, a DOCTYPE without an internal subset, the five predefined and
// numeric character references. It is bounded: at most 4 MiB of text, 64 levels of nesting, 4096 metadata entries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tmorph {

struct EmpadXml {
  std::string raw_filename;  // root/raw_file@filename as written
  // root/pix_x, root/pix_y; else root/scan_parameters/scan_resolution_x, _y (whichever pair is complete first).
  std::optional<uint64_t> scan_x, scan_y;
  std::string scan_x_path, scan_y_path;  // where they were read ("root/pix_x")
  std::optional<uint64_t> series_count;  // root/scan_parameters/series_count
  // Every element's text and every attribute: "root/iom_measurements/calibrated_pixelsize" -> {"value": text},
  // "root/raw_file@filename" -> {"value": text}; a repeated path keeps its first value.
  nlohmann::json metadata = nlohmann::json::object();
};

// The largest sidecar read (bytes): EMPAD's are a few KiB.
inline constexpr uint64_t kEmpadXmlMaxBytes = uint64_t{4} << 20;

// Whether the text looks like an EMPAD sidecar: it holds a <raw_file element (by text only; nothing is parsed).
bool looks_like_empad_xml(const uint8_t* data, size_t size);

// Parses `size` bytes of `path` (named in errors). Throws Error(BadInput) naming the path, the byte offset and what
// was expected for XML that is not well formed (or beyond the bounds above), for a root element other than <root>,
// a missing root/raw_file@filename, a scan size that is not a positive decimal integer below 2^32 (naming the
// element), and when neither a scan shape nor a series count is given.
EmpadXml parse_empad_xml(const uint8_t* data, size_t size, const std::string& path);

}  // namespace tmorph
