// Reads the frames of an acquisition: locates each frame's stored chunk through HDF5 (offsets only),
// then decodes it from a memory mapping of its data file without HDF5, so any number of threads
// decode at once. Codecs other than bitshuffle (see ChunkCodec) go through the HDF5 library, serially.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "formats/dectris.h"

namespace tmorph {

class MappedFile;

class FrameReader {
 public:
  explicit FrameReader(const Acquisition& acq);
  ~FrameReader();
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;

  // Where one frame's bytes lie: its part, its byte offset in the part's file, its stored size, and
  // whether HDF5 skipped the filter for it (then it is stored raw).
  struct Chunk {
    uint32_t part = 0;
    uint64_t offset = 0;
    uint64_t bytes = 0;
    bool raw = false;
  };

  // Locates the given frames (indices into the acquisition), in the given order, holding the HDF5
  // lock. A frame in a missing data file, a chunk never written, or one that lies past the end of its
  // file is Error(BadInput) naming the frame, the file and what was expected.
  std::vector<Chunk> locate(const std::vector<uint64_t>& frames) const;

  // Decodes `frame` (located as `chunk`) into out, frame_bytes() bytes. Thread-safe; scratch is the
  // calling thread's reusable buffer.
  void decode(uint64_t frame, const Chunk& chunk, uint8_t* out, std::vector<uint8_t>& scratch) const;

  uint64_t frame_bytes() const { return frame_bytes_; }
  // The codec name of each part in use (for provenance), deduplicated.
  std::vector<std::string> codecs() const;

 private:
  struct Part;
  const Acquisition& acq_;
  uint64_t frame_bytes_ = 0;
  std::vector<std::unique_ptr<Part>> parts_;
  const Part& part_of(uint64_t frame, uint32_t* index) const;
};

}  // namespace tmorph
