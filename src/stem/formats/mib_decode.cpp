#include "stem/formats/mib_decode.h"

#include <cstring>

#include "stem/formats/plain_files.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

uint64_t load_be64(const uint8_t* b) {
  uint64_t w = 0;
  for (int i = 0; i < 8; ++i) w = (w << 8) | b[i];
  return w;
}

template <class T>
void store(uint8_t* frame, uint64_t index, T v) {
  std::memcpy(frame + index * sizeof(T), &v, sizeof(T));
}

template <class T>
T load(const uint8_t* frame, uint64_t index) {
  T v;
  std::memcpy(&v, frame + index * sizeof(T), sizeof(T));
  return v;
}

// Where stored (linear) pixel p of a raw frame lands in the decoded frame, and the direction its chunk runs.
struct PixelPlacement {
  uint64_t index;
  int64_t step;
};

PixelPlacement place(bool quad, uint64_t p) {
  if (!quad) return {p, 1};
  constexpr uint64_t kSide = kMibChipSide, kRow = 4 * kMibChipSide, kOut = 2 * kMibChipSide;
  const uint64_t y = p / kRow, chunk = (p % kRow) / kSide, x = p % kSide;
  switch (chunk) {
    case 3: return {y * kOut + x, 1};
    case 2: return {y * kOut + kSide + x, 1};
    case 1: return {(kOut - 1 - y) * kOut + (kSide - 1 - x), -1};
    default: return {(kOut - 1 - y) * kOut + (kOut - 1 - x), -1};
  }
}

// Decodes one plane of `pixels` raw pixels of `bits` stored bits (1, 8 or 16) into T, combining each value v with
// what is there through put(old, v). A 64-bit word never straddles a chip's row (256 pixels = 4 words of 1-bit
// pixels, 32 of 8-bit, 64 of 16-bit), so one placement serves the word.
template <class T, class Put>
void decode_plane(const uint8_t* stored, uint64_t pixels, unsigned bits, bool quad, uint8_t* frame, Put put) {
  const unsigned per_word = 64 / bits;
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  for (uint64_t w = 0; w < pixels / per_word; ++w) {
    const uint64_t word = load_be64(stored + 8 * w);
    const PixelPlacement at = place(quad, w * per_word);
    for (unsigned k = 0; k < per_word; ++k) {
      const uint64_t i = static_cast<uint64_t>(static_cast<int64_t>(at.index) + at.step * static_cast<int64_t>(k));
      store<T>(frame, i, put(load<T>(frame, i), (word >> (k * bits)) & mask));
    }
  }
}

}  // namespace

MibPixels mib_pixels(const MibFrameHeader& h, std::optional<uint32_t> depth_hint, const std::string& file, uint64_t offset) {
  auto bad = [&](const std::string& what) {
    return Error(ErrorKind::BadInput, file + ": frame header at byte " + std::to_string(offset) + ": " + what);
  };
  MibPixels p;
  p.depth = h.counter_depth.value_or(depth_hint.value_or(0));
  if (!h.raw()) {
    if (h.pixel_type == "U08") p.dtype = DType::U8, p.element_size = 1;
    else if (h.pixel_type == "U16") p.dtype = DType::U16, p.element_size = 2;
    else if (h.pixel_type == "U32") p.dtype = DType::U32, p.element_size = 4;
    else
      throw bad("pixel type '" + h.pixel_type + "' is not read (U08, U16, U32 and R64 are)");
    p.stored_bits = 8 * p.element_size;
    // A counter deeper than the stored pixels (a lying header or .hdr) would give a saturation value no pixel holds.
    if (p.depth > p.stored_bits)
      throw bad("counter depth " + std::to_string(p.depth) + " (from the frame header or the .hdr) exceeds the " + h.pixel_type +
                " pixels' " + std::to_string(p.stored_bits) + " bits");
    p.rows = h.height, p.cols = h.width;
    p.stored_bytes = h.width * h.height * p.element_size;
    p.encoding = "mib " + h.pixel_type + " big-endian";
    return p;
  }
  p.raw = true;
  if (p.depth != 1 && p.depth != 6 && p.depth != 12 && p.depth != 24)
    throw bad(p.depth == 0 ? "a raw (R64) frame without a counter depth (neither the header's MQ1A fields nor the .hdr give one)"
                           : "raw counter depth " + std::to_string(p.depth) + " is not read (1, 6, 12 and 24 are)");
  const bool quad_layout = h.chip_layout == "2x2" || h.chip_layout == "2x2G";
  if (h.chips == 4 && quad_layout) p.quad = true;
  else if (h.chips != 1)
    throw bad("raw frames of " + std::to_string(h.chips) + " chips in layout '" + h.chip_layout +
              "' are not read (one chip, or four in 2x2 / 2x2G, are)");
  const uint64_t chip_pixels = kMibChipSide * kMibChipSide, pixels = h.chips * chip_pixels;
  const uint64_t planes = p.depth == 24 ? 2 : 1;
  if (h.width * h.height != pixels * planes)
    throw bad("a raw " + std::to_string(p.depth) + "-bit frame of " + std::to_string(h.chips) + " chip(s) stores " +
              std::to_string(pixels * planes) + " pixels, the header says " + std::to_string(h.width) + " x " + std::to_string(h.height));
  p.stored_bits = p.depth == 1 ? 1 : p.depth == 6 ? 8 : 16;
  p.stored_bytes = pixels * planes * p.stored_bits / 8;
  p.rows = p.cols = p.quad ? 2 * kMibChipSide : kMibChipSide;
  p.dtype = p.depth <= 6 ? DType::U8 : p.depth == 12 ? DType::U16 : DType::U32;
  p.element_size = p.depth <= 6 ? 1 : p.depth == 12 ? 2 : 4;
  p.encoding = "mib raw " + std::to_string(p.depth) + "-bit (R64)" + (p.quad ? ", 2x2 chips" : "");
  return p;
}

void mib_unpack(const MibPixels& p, const uint8_t* stored, uint8_t* frame) {
  const uint64_t pixels = p.rows * p.cols;
  if (!p.raw) {
    big_endian_to_host(stored, frame, pixels, p.element_size);
    return;
  }
  if (p.depth <= 6) {
    decode_plane<uint8_t>(stored, pixels, p.stored_bits, p.quad, frame,
                          [](uint8_t, uint64_t v) { return static_cast<uint8_t>(v); });
  } else if (p.depth == 12) {
    decode_plane<uint16_t>(stored, pixels, 16, p.quad, frame, [](uint16_t, uint64_t v) { return static_cast<uint16_t>(v); });
  } else {
    const uint64_t plane_bytes = pixels * 2;
    decode_plane<uint32_t>(stored, pixels, 16, p.quad, frame, [](uint32_t, uint64_t v) { return static_cast<uint32_t>((v & 0xfff) << 12); });
    decode_plane<uint32_t>(stored + plane_bytes, pixels, 16, p.quad, frame,
                           [](uint32_t high, uint64_t v) { return static_cast<uint32_t>(high | (v & 0xfff)); });
  }
}

}  // namespace tmorph
