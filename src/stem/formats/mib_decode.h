// How a Merlin frame's stored pixels become one row-major, native-endian frame (the layout facts, docs/stem.md
// "Merlin MIB"):
//
// - Processed frames (U08, U16, U32): `height` rows of `width` big-endian unsigned integers, row 0 first, as
//   stored; the frame is width x height (a 2x2G quad's gap pixels, when the header counts them, included).
// - Raw frames (R64): the counters as the chips read them out, in 64-bit words stored big-endian. A word holds
//   64 / b pixels of b stored bits (1-bit counters: b = 1; 6-bit: b = 8; 12-bit: b = 16); pixel k of a word (k = 0
//   first in the frame) is bits [k·b, (k+1)·b) of the word's value. 24-bit counters are two 12-bit frames one after
//   the other, the high 12 bits first: value = (first & 0xfff) << 12 | (second & 0xfff). One chip: 256 x 256 pixels
//   in row-major order. Quad (4 chips, layout 2x2 or 2x2G): 256 stored rows of 1024 pixels, each row holding one
//   row of each chip in the order [bottom right, bottom left, top right, top left]; the frame is 512 x 512 without a
//   gap, the top chips as stored and the bottom ones turned by 180°: stored row y, pixel x of chunk 3 → (y, x);
//   chunk 2 → (y, 256 + x); chunk 1 → (511 − y, 255 − x); chunk 0 → (511 − y, 511 − x).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "stem/formats/mib.h"
#include "tensormorph/dtype.h"

namespace tmorph {

struct MibPixels {
  bool raw = false;
  bool quad = false;                // raw frames of 4 chips assembled 2 x 2
  uint32_t depth = 0;               // counter bits (raw: 1, 6, 12, 24; processed: from the header or the .hdr, 0 when neither says)
  uint32_t stored_bits = 0;         // bits per stored pixel: processed 8/16/32, raw 1/8/16 (24-bit: two planes of 16)
  DType dtype = DType::U16;         // the frame's dtype: U8, U16 or U32
  uint32_t element_size = 2;
  uint64_t rows = 0, cols = 0;      // the decoded frame
  uint64_t stored_bytes = 0;        // pixel bytes after each frame header
  std::string encoding;             // for provenance: "mib U16 big-endian", "mib raw 12-bit (R64), 2x2 chips"
};

// What a frame with header `h` stores and decodes to; `depth_hint` is the .hdr's counter depth, used when the header
// has none. Throws Error(BadInput) "FILE: frame header at byte OFFSET: …" for what is not read (U01, U64, raw frames
// other than 1 chip or a 2 x 2 quad, raw depths other than 1/6/12/24, an unknown pixel type) and for dimensions that
// disagree with the chips (a raw frame must count chips × 256² pixels, twice that at 24 bits).
MibPixels mib_pixels(const MibFrameHeader& h, std::optional<uint32_t> depth_hint, const std::string& file, uint64_t offset);

// Decodes one frame's stored pixels (p.stored_bytes bytes) into `frame` (p.rows × p.cols × p.element_size bytes).
void mib_unpack(const MibPixels& p, const uint8_t* stored, uint8_t* frame);

}  // namespace tmorph
