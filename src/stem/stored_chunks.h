// The stored (still compressed) chunks of a window of an acquisition's frames, as its data files hold them, for a
// client that decodes them itself (the page's WGSL decoder: web/src/stem/webgpu/decode.ts). Each frame is one
// chunk (FrameReader reads it through HDF5's own chunk index: H5Dread_chunk); nothing is decoded here.
//
// Contract:
// - Frames [start, start + count) in acquisition order (frame i is scan position i of a row-major scan), every one
//   readable (FrameReader::check), `count` >= 1 and start + count <= frames_total().
// - Each chunk is either bitshuffle+LZ4 (filter 32008, LZ4: its 12-byte header and blocks as stored) or stored raw
//   (no filter, or HDF5 skipped the filter for that chunk: exactly one frame's bytes). Any other storage
//   (bitshuffle without LZ4, another HDF5 filter chain, a plain file's records) is Error(Unavailable) naming the
//   frame, its file and codec: such frames are decoded by the server (GET …/block).
// - `body` is the chunks' bytes back to back, each starting at a multiple of 4 bytes (zero padding between them),
//   so that a client reads any chunk as u32 words; offsets are into `body`.
// - `max_bytes` bounds body: a window whose chunks exceed it is Error(InvalidArgument) naming the frame that
//   crossed the bound (ask for fewer frames).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stem/acquisition.h"

namespace tmorph {

enum class StoredFilter { BitshuffleLz4, None };
const char* stored_filter_name(StoredFilter f);  // "bitshuffle_lz4", "none"

struct StoredChunk {
  uint64_t frame = 0;       // acquisition frame index (one chunk holds one frame)
  uint64_t offset = 0;      // byte offset of the chunk in StoredChunks::body (a multiple of 4)
  uint64_t bytes = 0;       // stored bytes (without padding)
  StoredFilter filter = StoredFilter::None;
  uint32_t block_bytes = 0; // bitshuffle+LZ4: the block size in bytes the chunk's header (byte 8) gives; 0 for none
  uint32_t part = 0;        // index into StoredChunks::files: the data file that holds it
};

struct StoredChunks {
  uint64_t start = 0, count = 0;
  DType dtype = DType::U16;
  uint32_t element_size = 2;
  uint64_t frame_rows = 0, frame_cols = 0, frame_bytes = 0;
  std::vector<std::string> files;     // data files (file names, not paths) the chunks come from
  std::vector<StoredChunk> entries;   // one per frame, in frame order
  std::vector<uint32_t> bad_pixels;   // pixels (row-major) the products zero (pixel_mask > 0)
  uint64_t sentinel = 0;              // the value the products zero (the dtype's maximum)
  std::string body;
};

StoredChunks read_stored_chunks(const Acquisition& acq, uint64_t start, uint64_t count, uint64_t max_bytes);

// Whether read_stored_chunks serves this acquisition's frames: integer frames whose every readable part is stored
// bitshuffle+LZ4 or unfiltered in HDF5 (one-frame chunks or a contiguous dataset), none in a plain file's records.
// (A chunk HDF5 stored raw despite the filter is served as "none" all the same.)
bool serves_stored_chunks(const Acquisition& acq);

}  // namespace tmorph
