// Reads the frames of an acquisition: each frame's stored (compressed) chunk is read as is through
// HDF5's direct chunk read under the HDF5 lock, a few microseconds per frame, then decoded by
// Tensormorph outside the lock, so any number of threads decode at once. (HDF5 1.10's
// H5Dget_chunk_info_by_coord costs ~20 µs per call here, ten times a direct read, so chunk offsets are
// not looked up.) Codecs other than bitshuffle (see ChunkCodec) go through the HDF5 library, serially.
// Frames stored as records of a plain file (ChunkCodec::FileRecords: MIB, .npy, ...) take no lock: decode()
// reads each record with pread on the calling thread and unpacks it there.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "stem/acquisition.h"

namespace tmorph {

class MappedFile;

class FrameReader {
 public:
  explicit FrameReader(const Acquisition& acq);
  ~FrameReader();
  FrameReader(const FrameReader&) = delete;
  FrameReader& operator=(const FrameReader&) = delete;

  // Checks that every frame lies in a readable data part, before anything is read: a frame in a missing
  // or unreadable data file is Error(BadInput) naming the frame and the file's problem.
  void check(const std::vector<uint64_t>& frames) const;

  // One frame's stored bytes as read from its file, and how they are encoded.
  struct Stored {
    std::vector<uint8_t> bytes;
    bool raw = false;       // stored unfiltered (no filter, or HDF5 skipped the filter for this chunk)
    uint64_t deferred = 0;  // stored bytes decode() reads itself (a plain file's record), not in `bytes`
    uint64_t size() const { return bytes.size() + deferred; }  // stored bytes this frame costs to read
  };

  // Reads frame's stored chunk into `stored` (HDF5 H5Dread_chunk under the HDF5 lock: only the
  // compressed bytes cross; contiguous data is copied from the mapping). A chunk never written or one
  // HDF5 cannot read (e.g. past the end of a truncated file) is Error(BadInput) naming frame and file.
  void read(uint64_t frame, Stored& stored) const;
  // The same for n frames under one acquisition of the HDF5 lock (threads that take the lock frame by
  // frame spend their time handing it over in the kernel instead of decoding).
  void read_batch(const uint64_t* frames, size_t n, Stored* stored) const;

  // Decodes frame's stored bytes into out (frame_bytes() bytes), outside any lock. `scratch` is the
  // calling thread's reusable buffer. Codecs HDF5 must run (Hdf5Pipeline) read and decode here, locked.
  void decode(uint64_t frame, const Stored& stored, uint8_t* out, std::vector<uint8_t>& scratch) const;

  // True when frame's stored chunk, as read, is one TM_OP_DECODE_BITSHUFFLE_LZ4 takes (bitshuffle+LZ4, not
  // stored raw); decode() serves the others.
  bool takes_lz4_op(uint64_t frame, const Stored& stored) const;
  // How errors name a frame: "<data file>, frame <n>".
  std::string where(uint64_t frame) const;

  uint64_t frame_bytes() const { return frame_bytes_; }
  // The codec name of each part in use (for provenance), deduplicated.
  std::vector<std::string> codecs() const;

 private:
  struct Part;
  const Acquisition& acq_;
  uint64_t frame_bytes_ = 0;
  std::vector<std::unique_ptr<Part>> parts_;
  const Part& part_of(uint64_t frame, uint32_t* index) const;
  void check_declared_block(const DataPart& d, uint64_t frame, const std::vector<uint8_t>& chunk) const;
};

}  // namespace tmorph
