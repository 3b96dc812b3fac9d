// Dectris (Arina, Eiger) 4D-STEM acquisitions in HDF5: discovery, metadata, readiness and the location
// of every frame's compressed chunk. Nothing here decodes pixel data (stem/frame_reader.h does).
//
// Layouts: `<prefix>_master.h5` whose group entry/data holds links data_NNNNNN, normally external links
// to `<prefix>_data_NNNNNN.h5:/entry/data/data` (shape (n, Kr, Kc), one frame per chunk, attributes
// image_nr_low/high, 1-based), or an inline dataset entry/data/data in the master itself.
// Frames are numbered 0.. in link-name order; the scan is row-major over them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensormorph/dtype.h"

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

struct Acquisition {
  std::string master;  // absolute path of the master (or the single file holding inline data)
  std::string layout;  // "external-links", "inline" or "data-file"
  std::vector<DataPart> parts;
  DType dtype = DType::U16;
  uint32_t element_size = 2;
  uint64_t detector_rows = 0, detector_cols = 0;  // Kr, Kc
  uint64_t frames_present = 0;                    // frames in parts that opened
  uint64_t frames_extent = 0;                     // one past the last frame a readable part holds
  std::optional<uint64_t> frames_expected;        // ntrigger × nimages from the detector metadata
  nlohmann::json metadata = nlohmann::json::object();  // every small scalar: HDF5 path -> value (+ units)
  std::vector<uint32_t> pixel_mask;               // Kr × Kc row-major, empty when the file has none
  std::string pixel_mask_path;
  std::optional<uint64_t> saturation_value;
  std::optional<double> beam_energy_ev, convergence_semi_angle_mrad;
  std::string description;
  // A scan shape the file records (Dectris files do not; Tensormorph's simulated ones do), and where.
  std::optional<std::array<uint64_t, 2>> scan_shape_recorded;
  std::string scan_shape_path;
  std::string signature;                 // 16 hex digits over every file's name, size, mtime and header
  std::vector<std::string> problems;     // readiness problems, in discovery order

  bool complete() const;
  // Frames the scan covers: expected when the metadata says, else as far as the readable parts reach.
  uint64_t frames_total() const { return frames_expected.value_or(frames_extent); }
  nlohmann::json readiness_json() const;
};

// Opens a master file, a Dectris data file (its master is used when present beside it) or a folder
// holding exactly one master. Never throws for an acquisition that is incomplete or being written:
// that is reported in `problems`. Throws Error(Io) when `path` cannot be opened at all, Error(BadInput)
// when it is not a Dectris-style acquisition (no entry/data), Error(InvalidArgument) for a folder with
// no master or several.
Acquisition open_acquisition(const std::string& path);

// Whether `path` names a 4D-STEM acquisition rather than a checkpoint: a file ending in .h5, .hdf5 or .nxs, or a
// folder holding a `*_master.h5` (at any depth). Reads no file contents.
bool looks_like_acquisition(const std::string& path);

// Every `*_master.h5` below folder (recursive, sorted).
std::vector<std::string> discover_masters(const std::string& folder);

// The scan shape (rows, cols): the given one (its product must equal frames_total()), else the one the
// file records, else a square one when frames_total() is a perfect square. Throws InvalidArgument otherwise.
std::array<uint64_t, 2> resolve_scan_shape(const Acquisition& acq, const std::optional<std::array<uint64_t, 2>>& given);
// Where resolve_scan_shape's answer `resolved` came from: `given_name` (e.g. "--scan-shape") when given, the
// recorded shape's HDF5 path when the file's shape was used, else "square frame count".
std::string scan_shape_source(const Acquisition& acq, const std::optional<std::array<uint64_t, 2>>& given,
                              const std::array<uint64_t, 2>& resolved, const std::string& given_name);

}  // namespace tmorph
