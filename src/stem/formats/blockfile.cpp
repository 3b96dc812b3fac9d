#include "stem/formats/blockfile.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

[[noreturn]] void bad(const std::string& where, uint64_t at, const std::string& what) {
  throw Error(ErrorKind::BadInput, where + ": at byte " + std::to_string(at) + ": " + what);
}

// Reads fixed-width fields at byte offsets of the header in the file's byte order. The caller checked the size.
struct Fields {
  const uint8_t* p;
  bool big;
  uint64_t uint(uint64_t at, unsigned bytes) const {
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; ++i) v |= uint64_t{p[at + i]} << (8 * (big ? bytes - 1 - i : i));
    return v;
  }
  uint16_t u16(uint64_t at) const { return static_cast<uint16_t>(uint(at, 2)); }
  uint32_t u32(uint64_t at) const { return static_cast<uint32_t>(uint(at, 4)); }
  double f64(uint64_t at) const {
    const uint64_t bits = uint(at, 8);
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
  }
};

// The note's bit depth, as LiberTEM reads it from 0x0103 files: a line "Blo Bit Depth: N bits" (case-insensitive).
// 0 when there is none.
unsigned note_bit_depth(const std::string& note) {
  std::string lower = note;
  for (char& c : lower) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  const std::string key = "blo bit depth:";
  const size_t at = lower.find(key);
  if (at == std::string::npos) return 0;
  size_t i = at + key.size();
  while (i < lower.size() && lower[i] == ' ') ++i;
  unsigned bits = 0;
  for (; i < lower.size() && lower[i] >= '0' && lower[i] <= '9' && bits < 1000; ++i) bits = bits * 10 + unsigned(lower[i] - '0');
  return bits;
}

}  // namespace

bool looks_like_blockfile(const uint8_t* bytes, uint64_t size) { return size >= 6 && std::memcmp(bytes, "IMGBLO", 6) == 0; }

BlockfileHeader parse_blockfile_header(const uint8_t* bytes, uint64_t size, const std::string& where) {
  if (!looks_like_blockfile(bytes, size)) bad(where, 0, "expected the blockfile magic IMGBLO");
  if (size < kBlockfileHeaderBytes)
    bad(where, size, "truncated inside the " + std::to_string(kBlockfileHeaderBytes) + "-byte header");
  BlockfileHeader h;
  const uint16_t le = static_cast<uint16_t>(bytes[6] | bytes[7] << 8);
  const uint16_t be = static_cast<uint16_t>(bytes[6] << 8 | bytes[7]);
  if (le == 0x0102 || le == 0x0103) h.magic = le;
  else if (be == 0x0102 || be == 0x0103) h.magic = be, h.big_endian = true;
  else bad(where, 6, "MAGIC " + std::to_string(le) + ": expected 0x0102 or 0x0103 (either byte order)");
  const Fields f{bytes, h.big_endian};
  h.image_offset = f.u32(8);
  h.data_offset = f.u32(12);
  h.flags = f.u32(16);
  h.detector_side = f.u16(20);
  h.dp_rotation = f.u16(22);
  h.scan_cols = f.u16(24);
  h.scan_rows = f.u16(26);
  h.scan_rotation = f.u16(28);
  h.scan_step_x_nm = f.f64(30);
  h.scan_step_y_nm = f.f64(38);
  h.beam_energy_v = f.u32(46);
  h.diffraction_scale = f.u16(50);
  h.camera_length = f.u32(52);
  h.acquisition_time = f.f64(56);
  for (unsigned i = 0; i < h.centering.size(); ++i) h.centering[i] = f.f64(64 + 8 * i);
  for (unsigned i = 0; i < h.distortion.size(); ++i) h.distortion[i] = f.f64(128 + 8 * i);

  // The note: from the end of the fixed header to the virtual image (as far as the bytes go), NULs trimmed.
  if (h.image_offset > kBlockfileHeaderBytes) {
    const uint64_t end = std::min({h.image_offset, size, kBlockfileHeaderBytes + kBlockfileNoteMaxBytes});
    std::string_view note(reinterpret_cast<const char*>(bytes) + kBlockfileHeaderBytes, end - kBlockfileHeaderBytes);
    while (!note.empty() && (note.back() == '\0' || note.back() == ' ' || note.back() == '\r' || note.back() == '\n'))
      note.remove_suffix(1);
    while (!note.empty() && note.front() == '\0') note.remove_prefix(1);
    h.note = std::string(note);
  }
  if (h.magic == 0x0103) {
    const unsigned bits = note_bit_depth(h.note);
    if (bits == 16) h.element_size = 2;
    else if (bits != 0 && bits != 8)
      bad(where, kBlockfileHeaderBytes, "the note says Blo Bit Depth: " + std::to_string(bits) + " bits: 8 or 16 are read");
  }

  if (h.detector_side == 0) bad(where, 20, "DP_SZ is 0: the frames have no pixels");
  if (h.scan_cols == 0) bad(where, 24, "NX is 0: the scan has no columns");
  if (h.scan_rows == 0) bad(where, 26, "NY is 0: the scan has no rows");
  if (h.data_offset < kBlockfileHeaderBytes)
    bad(where, 12, "Data_offset_2 " + std::to_string(h.data_offset) + " lies inside the " + std::to_string(kBlockfileHeaderBytes) +
                       "-byte header");
  // u16 extents and a u32 offset: frames < 2^32, a record < 2^33 bytes. Their end must be a file offset (off_t, 63
  // bits), which the product of the largest values is not.
  const uint64_t frames = h.frames(), record = h.record_bytes();
  constexpr uint64_t kMaxOffset = uint64_t{INT64_MAX};
  if (frames > (kMaxOffset - h.data_offset) / record)
    bad(where, 20, std::to_string(frames) + " frames of " + std::to_string(record) + " bytes from byte " + std::to_string(h.data_offset) +
                       " overflow the largest file offset (2^63 - 1)");
  return h;
}

std::string blockfile_frame_header_problem(const uint8_t* record, bool big_endian, uint32_t* number) {
  const Fields f{record, big_endian};
  *number = f.u32(2);
  const uint16_t magic = f.u16(0);
  if (magic == 0x55AA) return "";
  char hex[8];
  std::snprintf(hex, sizeof hex, "%04x", magic);
  return std::string("frame header 0x") + hex + ", expected 0x55aa";
}

std::string blockfile_image_problem(const BlockfileHeader& h) {
  const uint64_t end = h.image_offset + h.frames();  // < 2^33: cannot overflow
  if (h.image_offset < kBlockfileHeaderBytes)
    return "Data_offset_1 " + std::to_string(h.image_offset) + " lies inside the header: the stored virtual image is not read";
  if (end > h.data_offset)
    return "the stored virtual image (Data_offset_1 " + std::to_string(h.image_offset) + ", " + std::to_string(h.frames()) +
           " bytes) runs into the frames at Data_offset_2 " + std::to_string(h.data_offset) + ": not read";
  return "";
}

}  // namespace tmorph
