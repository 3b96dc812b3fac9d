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

#include "formats/frame_parts.h"
#include "tensormorph/dtype.h"

namespace tmorph {

// What a Dectris master (and its data files) says, as read: the STEM domain presents it as an Acquisition
// (stem/acquisition.h).
struct DectrisFile {
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
  std::vector<std::string> value_problems;  // of those, the ones that change products' values (stem/acquisition.h)
};

// Opens a master file, a Dectris data file (its master is used when present beside it) or a folder
// holding exactly one master. Never throws for an acquisition that is incomplete or being written:
// that is reported in `problems`. Throws Error(Io) when `path` cannot be opened at all, Error(BadInput)
// when it is not a Dectris-style acquisition (no entry/data), Error(InvalidArgument) for a folder with
// no master or several.
DectrisFile open_dectris(const std::string& path);

// Whether `path` may be a Dectris acquisition: a file ending in .h5, .hdf5 or .nxs, or a folder holding a
// `*_master.h5` (at any depth). Reads no file contents.
bool looks_like_dectris(const std::string& path);

// Every `*_master.h5` below folder (recursive, sorted).
std::vector<std::string> discover_masters(const std::string& folder);

}  // namespace tmorph
