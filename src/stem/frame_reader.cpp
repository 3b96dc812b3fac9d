#include "stem/frame_reader.h"

#include <algorithm>
#include <cstring>

#include "core/mapped_file.h"
#include "formats/bitshuffle_lz4.h"
#include "formats/hdf5_util.h"
#include "tensormorph/error.h"

namespace tmorph {

struct FrameReader::Part {
  const DataPart* info = nullptr;
  h5::Handle file, dataset;
  std::unique_ptr<MappedFile> mapping;
  haddr_t contiguous_base = HADDR_UNDEF;  // for contiguous (unchunked) datasets
};

FrameReader::FrameReader(const Acquisition& acq) : acq_(acq) {
  frame_bytes_ = acq.detector_rows * acq.detector_cols * acq.element_size;
  auto guard = h5::lock();
  for (const auto& info : acq.parts) {
    auto part = std::make_unique<Part>();
    part->info = &info;
    if (info.present && info.records) {
      part->mapping = std::make_unique<MappedFile>(info.file);
    } else if (info.present) {
      part->file = h5::open_file(info.file);
      // Chunks of several frames go through HDF5 one frame at a time: a cache that holds them decodes each once.
      constexpr uint64_t kChunkCacheBytes = 64ull << 20;
      part->dataset = h5::open_dataset(part->file.get(), info.dataset, info.codec == ChunkCodec::Hdf5Pipeline ? kChunkCacheBytes : 0);
      if (!part->dataset.valid()) throw Error(ErrorKind::BadInput, info.file + ": " + info.dataset + " vanished since the acquisition was opened");
      if (!info.one_frame_chunks && info.codec == ChunkCodec::Uncompressed) {
        part->contiguous_base = H5Dget_offset(part->dataset.get());
        part->mapping = std::make_unique<MappedFile>(info.file);
      }
    }
    parts_.push_back(std::move(part));
  }
}

FrameReader::~FrameReader() {
  auto guard = h5::lock();
  parts_.clear();
}

std::vector<std::string> FrameReader::codecs() const {
  std::vector<std::string> out;
  for (const auto& p : parts_) {
    if (!p->info->present) continue;
    const std::string name = p->info->records ? p->info->records->encoding : chunk_codec_name(p->info->codec);
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

const FrameReader::Part& FrameReader::part_of(uint64_t frame, uint32_t* index) const {
  for (uint32_t i = 0; i < parts_.size(); ++i) {
    const DataPart& d = *parts_[i]->info;
    if (d.present && frame >= d.first_frame && frame < d.first_frame + d.frames) {
      *index = i;
      return *parts_[i];
    }
  }
  std::string why = "not present in any readable data file";
  for (const auto& p : parts_)
    if (!p->info->present) {
      why += " (" + p->info->problem + ")";
      break;
    }
  throw Error(ErrorKind::BadInput, acq_.master + ": frame " + std::to_string(frame) + " is " + why);
}

void FrameReader::check(const std::vector<uint64_t>& frames) const {
  uint32_t index = 0;
  for (uint64_t f : frames) part_of(f, &index);
}

void FrameReader::read_batch(const uint64_t* frames, size_t n, Stored* stored) const {
  auto guard = h5::lock();
  for (size_t i = 0; i < n; ++i) read(frames[i], stored[i]);
}

void FrameReader::read(uint64_t frame, Stored& stored) const {
  uint32_t index = 0;
  const Part& part = part_of(frame, &index);
  const DataPart& d = *part.info;
  const uint64_t local = frame - d.first_frame;
  stored.raw = false;
  stored.deferred = 0;
  if (d.records) {
    const FileRecords& r = *d.records;
    const uint64_t offset = r.offset + local * r.record_bytes + r.header_bytes, size = part.mapping->size();
    if (offset > size || r.pixel_bytes > size - offset)
      throw Error(ErrorKind::BadInput, d.file + ": frame " + std::to_string(frame) + " at byte " + std::to_string(offset) + " (" +
                                           std::to_string(r.pixel_bytes) + " bytes) lies past the end of the file (" +
                                           std::to_string(size) + " bytes): truncated data file");
    stored.bytes.clear();
    stored.deferred = r.pixel_bytes;
    return;  // decode() reads it, unlocked
  }
  if (d.codec == ChunkCodec::Hdf5Pipeline) {
    stored.bytes.clear();
    return;  // HDF5 reads and decodes it in decode()
  }
  if (part.contiguous_base != HADDR_UNDEF) {
    const uint64_t offset = part.contiguous_base + local * frame_bytes_;
    if (offset > part.mapping->size() || frame_bytes_ > part.mapping->size() - offset)
      throw Error(ErrorKind::BadInput, d.file + ": frame " + std::to_string(frame) + " at byte " + std::to_string(offset) +
                                           " lies past the end of the file (" + std::to_string(part.mapping->size()) +
                                           " bytes): truncated data file");
    stored.bytes.resize(frame_bytes_);
    part.mapping->read_at(offset, stored.bytes.data(), frame_bytes_);
    stored.raw = true;
    return;
  }
  const hsize_t coord_3d[3] = {local, 0, 0};
  const hsize_t coord_4d[4] = {d.scan_cols ? local / d.scan_cols : 0, d.scan_cols ? local % d.scan_cols : 0, 0, 0};
  const hsize_t* coord = d.scan_cols ? coord_4d : coord_3d;
  auto guard = h5::lock();
  hsize_t size = 0;
  if (H5Dget_chunk_storage_size(part.dataset.get(), coord, &size) < 0 || size == 0)
    throw Error(ErrorKind::BadInput, d.file + ": frame " + std::to_string(frame) + " (local " + std::to_string(local) +
                                         ") has no stored chunk: not written yet, or the file is incomplete");
  // A frame's chunk is at most its LZ4 bound plus headers (2x the frame is generous); a chunk index that
  // claims more is damaged, and its size is never allocated.
  const uint64_t plausible = 2 * frame_bytes_ + 65536;
  if (size > plausible)
    throw Error(ErrorKind::BadInput, d.file + ": frame " + std::to_string(frame) + ": the chunk index says " + std::to_string(size) +
                                         " stored bytes for a " + std::to_string(frame_bytes_) + "-byte frame (at most " +
                                         std::to_string(plausible) + " expected): damaged data file");
  stored.bytes.resize(size);
  uint32_t filter_mask = 0;
  if (H5Dread_chunk(part.dataset.get(), H5P_DEFAULT, coord, &filter_mask, stored.bytes.data()) < 0)
    throw Error(ErrorKind::BadInput, d.file + ": frame " + std::to_string(frame) + ": HDF5 cannot read its " + std::to_string(size) +
                                         "-byte chunk (" + h5::last_error() + "): truncated or damaged data file");
  stored.raw = filter_mask != 0 || d.codec == ChunkCodec::Uncompressed;
  if (!stored.raw && d.codec == ChunkCodec::BitshuffleLz4) check_declared_block(d, frame, stored.bytes);
}

// The bitshuffle filter's options (cd_values[3], in elements; 0 = the library's default, written into each
// chunk's header) name the block size the writer used; a chunk whose header says otherwise is damaged.
void FrameReader::check_declared_block(const DataPart& d, uint64_t frame, const std::vector<uint8_t>& chunk) const {
  const uint32_t declared = d.bitshuffle_options.size() > 3 ? d.bitshuffle_options[3] : 0;
  if (declared == 0 || chunk.size() < 12) return;  // a short chunk is the decoder's to name
  const uint64_t header = (uint64_t{chunk[8]} << 24) | (uint64_t{chunk[9]} << 16) | (uint64_t{chunk[10]} << 8) | chunk[11];
  const uint64_t expected = uint64_t{declared} * acq_.element_size;
  if (header != expected)
    throw Error(ErrorKind::BadInput, d.file + ": frame " + std::to_string(frame) + ": the chunk's header (byte 8) says blocks of " +
                                         std::to_string(header) + " bytes, the dataset's bitshuffle filter options say " +
                                         std::to_string(declared) + " elements (" + std::to_string(expected) +
                                         " bytes): damaged data file");
}

bool FrameReader::takes_lz4_op(uint64_t frame, const Stored& stored) const {
  uint32_t index = 0;
  return !stored.raw && part_of(frame, &index).info->codec == ChunkCodec::BitshuffleLz4;
}

std::string FrameReader::where(uint64_t frame) const {
  uint32_t index = 0;
  return part_of(frame, &index).info->file + ", frame " + std::to_string(frame);
}

void FrameReader::decode(uint64_t frame, const Stored& stored, uint8_t* out, std::vector<uint8_t>& scratch) const {
  uint32_t index = 0;
  const Part& part = part_of(frame, &index);
  const DataPart& d = *part.info;
  const std::string where = this->where(frame);
  if (d.records) {
    const FileRecords& r = *d.records;
    const uint64_t offset = r.offset + (frame - d.first_frame) * r.record_bytes + r.header_bytes;
    if (!r.unpack) {
      if (r.pixel_bytes != frame_bytes_)
        throw Error(ErrorKind::Internal, where + ": a record of " + std::to_string(r.pixel_bytes) + " bytes for a " +
                                             std::to_string(frame_bytes_) + "-byte frame needs an unpack step");
      part.mapping->read_at(offset, out, frame_bytes_);
      return;
    }
    scratch.resize(r.pixel_bytes);
    part.mapping->read_at(offset, scratch.data(), r.pixel_bytes);
    try {
      r.unpack(scratch.data(), out);
    } catch (const Error& e) {  // the format's check of the record (a frame header that lies): name frame and byte
      throw Error(e.kind(), where + " (record at byte " + std::to_string(offset - r.header_bytes) + "): " + e.what());
    }
    return;
  }
  if (d.codec == ChunkCodec::Hdf5Pipeline) {
    auto guard = h5::lock();
    const uint64_t local = frame - d.first_frame;
    const hsize_t start_3d[3] = {local, 0, 0}, count_3d[3] = {1, acq_.detector_rows, acq_.detector_cols};
    const hsize_t start_4d[4] = {d.scan_cols ? local / d.scan_cols : 0, d.scan_cols ? local % d.scan_cols : 0, 0, 0};
    const hsize_t count_4d[4] = {1, 1, acq_.detector_rows, acq_.detector_cols};
    const int rank = d.scan_cols ? 4 : 3;
    h5::Handle file_space(H5Dget_space(part.dataset.get()), H5Sclose);
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, d.scan_cols ? start_4d : start_3d, nullptr, d.scan_cols ? count_4d : count_3d,
                        nullptr);
    h5::Handle mem_space(H5Screate_simple(rank, d.scan_cols ? count_4d : count_3d, nullptr), H5Sclose);
    const hid_t mem_type = acq_.element_size == 1 ? H5T_NATIVE_UINT8 : acq_.element_size == 2 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT32;
    if (H5Dread(part.dataset.get(), mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, out) < 0)
      throw Error(ErrorKind::BadInput, where + ": HDF5 could not read the frame: " + h5::last_error());
    return;
  }
  const uint8_t* bytes = stored.bytes.data();
  const uint64_t n = stored.bytes.size();
  if (stored.raw) {
    if (n != frame_bytes_)
      throw Error(ErrorKind::BadInput, where + ": stored uncompressed chunk has " + std::to_string(n) + " bytes, a frame has " +
                                           std::to_string(frame_bytes_));
    std::memcpy(out, bytes, frame_bytes_);
  } else if (d.codec == ChunkCodec::BitshuffleLz4) {
    decode_bitshuffle_lz4_chunk(bytes, n, acq_.element_size, out, frame_bytes_, where, scratch);
  } else {
    const uint32_t block = d.bitshuffle_options.size() > 3 ? d.bitshuffle_options[3] : 0;
    decode_bitshuffle_plain_chunk(bytes, n, acq_.element_size, block, out, frame_bytes_, where);
  }
}

}  // namespace tmorph
