// Quantum Detectors Merlin (Medipix3) `.mib` files: the ASCII header in front of every frame, the `.hdr` acquisition
// header written beside the file, and what the two say about how a frame's pixels are stored. Parsing only: the
// opener (mib_opener.cpp) turns a file into an Acquisition, mib_decode.h turns stored pixels into frames.
//
// A frame header is comma-separated ASCII, NUL-padded to its own length (field 2), e.g.
//   MQ1,000001,00384,01,0256,0256,U16,   1x1,01,2020-05-18 16:51:49.971626,0.000555,0,0,0,1.2E+1,...,
//   3RX,175,511,...(DACs per chip)...,MQ1A,2020-05-18T14:51:49.971626178Z,555000ns,12,
// fields: 0 "MQ1", 1 sequence number (1-based), 2 header bytes (the pixels follow), 3 chips, 4 width (pixels),
// 5 height, 6 pixel type (U08/U16/U32 processed, big-endian; R64 raw), 7 chip layout ("1x1", "2x2", "2x2G",
// "Nx1"), 8 chip select, 9 time stamp, 10 shutter time (s), 11 counter, 12 colour mode, 13 gain mode, 14-21
// thresholds (keV); after the marker "MQ1A": extended time stamp, shutter time ("…ns"), counter depth (bits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tmorph {

// Bounds on what a header may claim (no real Merlin comes near them): a larger claim is BadInput, never an allocation.
inline constexpr uint64_t kMibMaxHeaderBytes = 1 << 16;
inline constexpr uint64_t kMibMaxSide = 1 << 14;          // pixels per frame side
inline constexpr uint64_t kMibMaxPixels = uint64_t{1} << 26;  // pixels per frame
inline constexpr uint64_t kMibChipSide = 256;              // a Medipix3 chip is 256 x 256 pixels

struct MibFrameHeader {
  uint64_t sequence = 0;      // field 1
  uint64_t header_bytes = 0;  // field 2
  uint32_t chips = 0;         // field 3
  uint64_t width = 0, height = 0;  // fields 4, 5 (pixels as stored; raw frames: see mib_decode.h)
  std::string pixel_type;     // field 6: "U08", "U16", "U32", "R64", ...
  std::string chip_layout;    // field 7, spaces trimmed: "1x1", "2x2", "2x2G", "Nx1"
  std::string chip_select, timestamp;  // fields 8, 9
  std::optional<double> shutter_s;     // field 10
  std::optional<uint32_t> counter, colour_mode, gain_mode;  // fields 11, 12, 13
  std::vector<double> thresholds_kev;  // fields 14-21, as many as parse
  // After "MQ1A" (absent in old firmware's headers):
  std::string timestamp_ext;
  std::optional<double> shutter_ns;
  std::optional<uint32_t> counter_depth;  // bits: 1, 6, 12 or 24
  // The byte range of fields 2-7 in the header text: equal in every frame of one file (they fix the record layout).
  size_t layout_begin = 0, layout_end = 0;

  bool raw() const { return pixel_type == "R64"; }
};

// Parses the header at the start of `bytes` (n bytes available, at least header_bytes when the caller knows it).
// `file` and `offset` (of the header in the file) name it in errors. Throws Error(BadInput) "FILE: frame header at
// byte OFFSET: …" for a missing "MQ1" magic, a field that is not a number, a header length outside [16,
// kMibMaxHeaderBytes] or longer than the bytes given, sizes beyond the bounds above.
MibFrameHeader parse_mib_frame_header(const uint8_t* bytes, size_t n, const std::string& file, uint64_t offset);

// The `.hdr` written beside an acquisition: lines "Key:<TAB>value" between "HDR," and "End". Keys are kept as
// written (without the colon), values with surrounding spaces trimmed, in file order.
struct MibAcquisitionHeader {
  std::vector<std::pair<std::string, std::string>> fields;
  std::optional<uint64_t> frames_in_acquisition;  // "Frames in Acquisition (Number)"
  std::optional<uint64_t> frames_per_trigger;     // "Frames per Trigger (Number)"
  std::optional<uint32_t> counter_depth;          // "Counter Depth (number)"
  std::optional<uint64_t> scan_x, scan_y;         // "ScanX", "ScanY" (newer firmware)
  std::string assembly_size, chip_type;           // "Assembly Size (NX1, 2X2)", "Chip Type (…)"
};

// Parses a .hdr's text (at most 1 MiB is read by the opener). Throws Error(BadInput) naming `file` and the line when
// the text does not start with "HDR" or a number field is not a number.
MibAcquisitionHeader parse_mib_acquisition_header(const std::string& text, const std::string& file);

}  // namespace tmorph
