// Where an acquisition's frames are stored: runs of frames in HDF5 datasets, each frame one chunk or a slab of
// a contiguous dataset, and how a stored chunk becomes pixels. Written by the acquisition parsers of this folder
// (dectris.h), read by the STEM domain's frame reader (stem/frame_reader.h) whatever the container.
#pragma once

#include <cstdint>
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
};
const char* chunk_codec_name(ChunkCodec c);

// One linked or inline dataset of frames.
struct DataPart {
  std::string link;       // name under entry/data ("data_000001", or "data" when inline)
  std::string file;       // file that holds the dataset (absolute)
  std::string dataset;    // HDF5 path inside it
  bool present = false;   // the file opened and the dataset exists with a usable shape
  std::string problem;    // why not, when !present
  uint64_t frames = 0;
  uint64_t first_frame = 0;  // index of its first frame in the acquisition
  std::optional<int64_t> image_nr_low, image_nr_high;
  // Storage, read from the dataset.
  ChunkCodec codec = ChunkCodec::Uncompressed;
  bool one_frame_chunks = false;  // chunk shape (1, Kr, Kc): each frame is one chunk
  std::vector<unsigned> filter_ids;
  std::vector<unsigned> bitshuffle_options;  // filter 32008's client values, when present
};

}  // namespace tmorph
