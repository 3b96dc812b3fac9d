// The acquisition openers' table: one row per 4D-STEM file format. open_acquisition (stem/acquisition.h)
// offers a path to each row in order; the first that claims it opens it. A new detector format is one file of
// this folder defining one row (with its parser beside it: STEM-only formats such as MIB live here; a container
// shared with checkpoints, such as HDF5 or .npy headers, is read through src/formats/), and that row in
// acquisition_openers.cpp. Frames stored as records of a plain file are described by FileRecords
// (formats/frame_parts.h) and read by the frame reader; the signature is acquisition_signature's.
#pragma once

#include <string>
#include <vector>

#include "stem/acquisition.h"

namespace tmorph {

struct AcquisitionOpener {
  const char* name;  // Acquisition::format: "dectris"
  // Whether the path is this format's, by name only (no file is read): a file's extension, a folder holding one.
  bool (*claims)(const std::string& path);
  Acquisition (*open)(const std::string& path);
  // Every acquisition of this format below a folder (recursive, sorted).
  std::vector<std::string> (*discover)(const std::string& folder);
  // The file extensions this format's files carry, space-separated, lower case (".npy"): a file no row claims (a
  // claim may read the header and decline, as .npy's does for a float array) is opened by the row whose
  // extension it has, which says why it is not an acquisition it reads.
  const char* extensions = "";
};

// The rows, in the order they are asked.
const std::vector<const AcquisitionOpener*>& acquisition_openers();

}  // namespace tmorph
