// A 4D-STEM acquisition, whatever wrote it: the scan's frames (where they are stored and how they decode), the
// detector shape and dtype, readiness (frames present of those expected, problems), the calibration hints the
// file carries (each with where it came from) and every small metadata scalar. The STEM domain's products, SSB,
// the server, Python and the MPI bands speak only this type. Files become Acquisitions through the openers'
// table (stem/formats/acquisition_openers.h); Dectris HDF5 is the first row.
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

struct Acquisition {
  std::string format;  // the opener's name: "dectris"
  std::string master;  // absolute path of the file that names the acquisition (a Dectris master, ...)
  std::string layout;  // how its frames are laid out, in the format's words ("external-links", "inline", ...)
  std::vector<DataPart> parts;  // the frame source: runs of stored frames, in frame order
  DType dtype = DType::U16;
  uint32_t element_size = 2;
  uint64_t detector_rows = 0, detector_cols = 0;  // Kr, Kc
  uint64_t frames_present = 0;                    // frames in parts that opened
  uint64_t frames_extent = 0;                     // one past the last frame a readable part holds
  std::optional<uint64_t> frames_expected;        // from the file's metadata (Dectris: ntrigger × nimages)
  nlohmann::json metadata = nlohmann::json::object();  // every small scalar: path in the file -> value (+ units)
  std::vector<uint32_t> pixel_mask;               // Kr × Kc row-major, empty when the file has none
  std::string pixel_mask_path;
  std::optional<uint64_t> saturation_value;
  std::optional<double> beam_energy_ev, convergence_semi_angle_mrad;
  std::string description;
  // A scan shape the file records, and where.
  std::optional<std::array<uint64_t, 2>> scan_shape_recorded;
  std::string scan_shape_path;
  std::string signature;                 // 16 hex digits over every file's name, size, mtime and header
  std::vector<std::string> problems;     // readiness problems, in discovery order
  // Of `problems`, those that change the values of a product computed anyway (a pixel mask not applied, data files
  // whose frames overlap, so that some are dropped): such a product is incomplete (exit 7, refuse_if_values_changed).
  std::vector<std::string> value_problems;

  bool complete() const;
  // Frames the scan covers: expected when the metadata says, else as far as the readable parts reach.
  uint64_t frames_total() const { return frames_expected.value_or(frames_extent); }
  // Frames 0 … n-1 all held by readable parts (what can be read while the rest is still being written).
  uint64_t frames_readable_prefix() const;
  nlohmann::json readiness_json() const;
  // What a product's report carries about the acquisition it was computed from: {"status", "problems",
  // "changing_values"}; null when there is no problem.
  nlohmann::json problems_report() const;
};

// Throws Incomplete (exit 7) naming `what` (the product written) when the acquisition has value_problems: called by
// the faces after the product and its report were written, so everything is delivered and a script still knows.
void refuse_if_values_changed(const Acquisition& acq, const std::string& what);

// Opens PATH through the first opener that claims it (a Dectris master or data file, or a folder holding exactly
// one acquisition). Never throws for an acquisition that is incomplete or being written: that is reported in
// `problems`. Throws Error(Io) when `path` cannot be opened at all, Error(BadInput) when it is not an acquisition
// of any known format, Error(InvalidArgument) for a folder with none or several.
Acquisition open_acquisition(const std::string& path);

// Whether `path` names a 4D-STEM acquisition rather than a checkpoint, by name only (any opener claims it).
bool looks_like_acquisition(const std::string& path);

// Every acquisition below folder (recursive, sorted): the paths open_acquisition takes.
std::vector<std::string> discover_acquisitions(const std::string& folder);

// The scan shape (rows, cols): the given one (its product must equal frames_total()), else the one the
// file records, else a square one when frames_total() is a perfect square. Throws InvalidArgument otherwise.
std::array<uint64_t, 2> resolve_scan_shape(const Acquisition& acq, const std::optional<std::array<uint64_t, 2>>& given);
// Where resolve_scan_shape's answer `resolved` came from: `given_name` (e.g. "--scan-shape") when given, the
// recorded shape's path when the file's shape was used, else "square frame count".
std::string scan_shape_source(const Acquisition& acq, const std::optional<std::array<uint64_t, 2>>& given,
                              const std::array<uint64_t, 2>& resolved, const std::string& given_name);

}  // namespace tmorph
