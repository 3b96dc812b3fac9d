// NanoMegas ASTAR blockfiles (.blo): the fixed header, the note after it, where the stored virtual image and the
// frames are, and each frame's 6-byte header. Layout as published by rosettasciio's blockfile reader/writer and
// LiberTEM's BLO reader (descriptions, not code, followed; docs/stem.md "NanoMegas blockfile" lists what is read).
//
// All header integers are in the file's byte order: little-endian when bytes 6-7 read 0x0102 or 0x0103 as
// little-endian, big-endian when they read so as big-endian. Offsets are bytes from the start of the file.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace tmorph {

inline constexpr uint64_t kBlockfileHeaderBytes = 240;      // the fixed fields; the note follows, up to the image
inline constexpr uint64_t kBlockfileFrameHeaderBytes = 6;   // 0x55AA then a uint32 frame number, per frame
inline constexpr uint64_t kBlockfileNoteMaxBytes = 1 << 16;  // note bytes read at most

struct BlockfileHeader {
  bool big_endian = false;
  uint16_t magic = 0;                 // byte 6: 0x0102 or 0x0103
  uint64_t image_offset = 0;          // byte 8 (Data_offset_1): the virtual image, scan_rows × scan_cols uint8
  uint64_t data_offset = 0;           // byte 12 (Data_offset_2): the first frame record
  uint32_t flags = 0;                 // byte 16: not interpreted
  uint64_t detector_side = 0;         // byte 20 (DP_SZ): frames are detector_side × detector_side
  uint16_t dp_rotation = 0;           // byte 22: hundredths of a degree (as published; not applied)
  uint64_t scan_cols = 0;             // byte 24 (NX)
  uint64_t scan_rows = 0;             // byte 26 (NY)
  uint16_t scan_rotation = 0;         // byte 28: hundredths of a degree
  double scan_step_x_nm = 0, scan_step_y_nm = 0;  // bytes 30, 38 (SX, SY)
  uint32_t beam_energy_v = 0;         // byte 46
  uint16_t diffraction_scale = 0;     // byte 50 (SDP): 100 × pixels per cm
  uint32_t camera_length = 0;         // byte 52: tenths of a millimetre (as published)
  double acquisition_time = 0;        // byte 56: a serial date (days since 1899-12-30)
  std::array<double, 8> centering{};  // bytes 64-127: not applied
  std::array<double, 14> distortion{};  // bytes 128-239: not applied
  std::string note;                   // bytes 240 .. image_offset (at most kBlockfileNoteMaxBytes), NULs trimmed, latin-1
  uint32_t element_size = 1;          // 1 (uint8); 2 when a 0x0103 file's note says "Blo Bit Depth: 16 bits"

  uint64_t frames() const { return scan_rows * scan_cols; }
  uint64_t pixel_bytes() const { return detector_side * detector_side * element_size; }
  uint64_t record_bytes() const { return kBlockfileFrameHeaderBytes + pixel_bytes(); }
};

// True when bytes start with "IMGBLO".
bool looks_like_blockfile(const uint8_t* bytes, uint64_t size);

// Parses the header held in bytes[0, size) (the first bytes of the file: at least 240, and the note up to
// image_offset when the caller read that far). Checks that the scan and detector are not empty, that the frames'
// byte count fits 64 bits and the data offset lies past the fixed header. Throws Error(BadInput) naming `where`, the
// field and its byte offset otherwise. Does not look at the frames or the file's size.
BlockfileHeader parse_blockfile_header(const uint8_t* bytes, uint64_t size, const std::string& where);

// Why the 6-byte frame header at `record` is not 0x55AA in the file's byte order, or "" when it is; its frame
// number in *number.
std::string blockfile_frame_header_problem(const uint8_t* record, bool big_endian, uint32_t* number);

// Where the stored virtual image is usable: "" when [image_offset, image_offset + rows × cols) lies between the fixed
// header and the first frame, else why not.
std::string blockfile_image_problem(const BlockfileHeader& h);

}  // namespace tmorph
