#include "stem/stored_chunks.h"

#include <cstring>
#include <filesystem>

#include "stem/frame_reader.h"
#include "stem/load.h"
#include "tensormorph/error.h"

namespace tmorph {

const char* stored_filter_name(StoredFilter f) { return f == StoredFilter::BitshuffleLz4 ? "bitshuffle_lz4" : "none"; }

namespace {

// The data part holding `frame` (FrameReader::check has found one).
const DataPart& part_holding(const Acquisition& acq, uint64_t frame) {
  for (const DataPart& d : acq.parts)
    if (d.present && frame >= d.first_frame && frame - d.first_frame < d.frames) return d;
  throw Error(ErrorKind::Internal, "frame " + std::to_string(frame) + " lies in no data part");
}

uint32_t header_block_bytes(const std::vector<uint8_t>& chunk) {
  if (chunk.size() < 12) return 0;  // a short chunk: the decoder names it
  return (uint32_t{chunk[8]} << 24) | (uint32_t{chunk[9]} << 16) | (uint32_t{chunk[10]} << 8) | chunk[11];
}

}  // namespace

bool serves_stored_chunks(const Acquisition& acq) {
  if (acq.dtype != DType::U8 && acq.dtype != DType::U16 && acq.dtype != DType::U32) return false;
  bool any = false;
  for (const DataPart& d : acq.parts) {
    if (!d.present) continue;
    if (d.records || (d.codec != ChunkCodec::BitshuffleLz4 && d.codec != ChunkCodec::Uncompressed)) return false;
    any = true;
  }
  return any;
}

StoredChunks read_stored_chunks(const Acquisition& acq, uint64_t start, uint64_t count, uint64_t max_bytes) {
  const uint64_t total = acq.frames_total();
  if (count == 0 || start >= total || count > total - start)
    throw Error(ErrorKind::InvalidArgument, "frames [" + std::to_string(start) + ", " + std::to_string(start + count) +
                                                ") are not a non-empty window of the acquisition's " + std::to_string(total) + " frames");
  if (acq.dtype == DType::F32 || acq.dtype == DType::F64)
    throw Error(ErrorKind::Unavailable, "the frames are " + std::string(dtype_name(acq.dtype)) +
                                            ": stored chunks are served for u8, u16 and u32 frames only");
  StoredChunks out;
  out.start = start;
  out.count = count;
  out.dtype = acq.dtype;
  out.element_size = acq.element_size;
  out.frame_rows = acq.detector_rows;
  out.frame_cols = acq.detector_cols;
  out.sentinel = unsigned_max(acq.dtype);
  for (uint32_t i = 0; i < acq.pixel_mask.size(); ++i)
    if (acq.pixel_mask[i] > 0) out.bad_pixels.push_back(i);
  FrameReader reader(acq);
  out.frame_bytes = reader.frame_bytes();
  std::vector<uint64_t> frames(count);
  for (uint64_t i = 0; i < count; ++i) frames[i] = start + i;
  reader.check(frames);
  std::vector<FrameReader::Stored> stored(count);
  reader.read_batch(frames.data(), frames.size(), stored.data());
  out.entries.reserve(count);
  uint64_t size = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t frame = frames[i];
    const FrameReader::Stored& s = stored[i];
    StoredChunk c;
    c.frame = frame;
    c.bytes = s.bytes.size();
    if (reader.takes_lz4_op(frame, s)) {
      c.filter = StoredFilter::BitshuffleLz4;
      c.block_bytes = header_block_bytes(s.bytes);
    } else if (s.raw && s.deferred == 0 && s.bytes.size() == out.frame_bytes) {
      c.filter = StoredFilter::None;
    } else {
      throw Error(ErrorKind::Unavailable, reader.where(frame) + ": stored as " + chunk_codec_name(part_holding(acq, frame).codec) +
                                              ", which only the server decodes (GET …/block)");
    }
    const std::string file = std::filesystem::path(part_holding(acq, frame).file).filename().string();
    uint32_t part = 0;
    while (part < out.files.size() && out.files[part] != file) ++part;
    if (part == out.files.size()) out.files.push_back(file);
    c.part = part;
    c.offset = size;
    size += (c.bytes + 3) / 4 * 4;
    if (size > max_bytes)
      throw Error(ErrorKind::InvalidArgument, "frames [" + std::to_string(start) + ", " + std::to_string(start + count) +
                                                  "): their stored chunks pass " + std::to_string(max_bytes) + " bytes at frame " +
                                                  std::to_string(frame) + ": ask for fewer frames");
    out.entries.push_back(c);
  }
  out.body.assign(size, '\0');
  for (uint64_t i = 0; i < count; ++i)
    if (stored[i].bytes.size()) std::memcpy(out.body.data() + out.entries[i].offset, stored[i].bytes.data(), stored[i].bytes.size());
  return out;
}

}  // namespace tmorph
