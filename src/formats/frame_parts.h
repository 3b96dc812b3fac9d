// Where an acquisition's frames are stored: runs of frames in HDF5 datasets (each frame one chunk or a slab of
// a contiguous dataset) or fixed-size records of a plain file (MIB, .npy, ...), and how stored bytes become
// pixels. Written by the acquisition parsers of this folder (dectris.h, ...), read by the STEM domain's frame
// reader (stem/frame_reader.h) whatever the container.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tmorph {

// How a frame's stored chunk becomes pixels.
enum class ChunkCodec {
  BitshuffleLz4,    // filter 32008 with LZ4: decoded by Tensormorph in parallel
  BitshufflePlain,  // filter 32008 without compression: unshuffled by Tensormorph
  Uncompressed,     // no filter (chunked or contiguous): copied
  Hdf5Pipeline,     // any other filter chain: read through the HDF5 library (serial), reported as such
  FileRecords,      // not HDF5: fixed-size records of a plain file (DataPart::records), read with pread
};
const char* chunk_codec_name(ChunkCodec c);

// Frames stored as fixed-size records of a plain file: frame i of the part is the record at byte
// `offset + i * record_bytes`, its stored pixels `header_bytes` into the record, `pixel_bytes` long. `unpack`
// turns those stored bytes into one frame of the acquisition (row-major, native-endian, the acquisition's dtype,
// detector_rows × detector_cols × element_size bytes); empty when the stored bytes are the frame already.
struct FileRecords {
  uint64_t offset = 0, record_bytes = 0, header_bytes = 0, pixel_bytes = 0;
  std::string encoding;  // how the pixels are stored, for provenance: "uint16 little-endian", "mib raw 12-bit", ...
  // May throw Error(BadInput) when the stored bytes contradict the format (a frame header that lies); the frame
  // reader adds the file, frame number and record offset to its message.
  std::function<void(const uint8_t* stored, uint8_t* frame)> unpack;
};

// One run of frames: a linked or inline HDF5 dataset, or records of a plain file (`records` set).
struct DataPart {
  std::string link;       // name under entry/data ("data_000001", or "data" when inline)
  std::string file;       // file that holds the dataset (absolute)
  std::string dataset;    // HDF5 path inside it
  bool present = false;   // the file opened and the dataset exists with a usable shape
  std::string problem;    // why not, when !present
  uint64_t frames = 0;
  uint64_t first_frame = 0;  // index of its first frame in the acquisition
  uint64_t scan_cols = 0;    // a 4-D HDF5 dataset (Rr, Rc, Kr, Kc): Rc (frame i is at (i / Rc, i % Rc)); 0 for (n, Kr, Kc)
  std::optional<int64_t> image_nr_low, image_nr_high;
  // Storage, read from the dataset.
  ChunkCodec codec = ChunkCodec::Uncompressed;
  bool one_frame_chunks = false;  // chunk shape (1, Kr, Kc): each frame is one chunk
  std::vector<unsigned> filter_ids;
  std::vector<unsigned> bitshuffle_options;  // filter 32008's client values, when present
  std::optional<FileRecords> records;        // codec FileRecords: where the plain file's frames are
};

// An acquisition's source identity: 16 hex digits (XXH3) over each file's name, size, modification time and a
// hash of its first 4 KiB (files sorted, duplicates once; an absent or unreadable file is named as such). It
// changes when any file of the acquisition changes or grows.
std::string acquisition_signature(std::vector<std::string> files);

}  // namespace tmorph
