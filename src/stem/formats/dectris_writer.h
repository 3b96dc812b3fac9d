// Writes an acquisition in the Dectris layout through the HDF5 library: `<prefix>_master.h5` with the
// detector metadata and entry/data/data_NNNNNN external links to `<prefix>_data_NNNNNN.h5`
// (entry/data/data, shape (n, Kr, Kc), one frame per chunk, image_nr_low/high), or one inline
// entry/data/data in the master. Chunks are bitshuffle+LZ4 (filter 32008, options block 0, LZ4),
// encoded either by Tensormorph's encoder and stored with H5Dwrite_chunk, or by the installed HDF5
// bitshuffle filter itself (H5Dwrite), so tests can decode chunks another implementation wrote.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensormorph/dtype.h"

namespace tmorph {

struct DectrisWriterOptions {
  std::string folder;
  std::string prefix = "demo";
  bool inline_data = false;        // entry/data/data inside the master instead of data files
  uint64_t frames_per_file = 0;    // 0: every frame in one data file
  std::string encoder = "tensormorph";  // "tensormorph", "hdf5-filter" (the plugin) or "none" (no filter)
  uint32_t block_elements = 0;     // bitshuffle block (elements); 0 = the filter's default
};

// Master-file content beyond the frames: scalars by HDF5 path ("entry/instrument/detector/count_time")
// as {"value": v, "units": "s"} (units optional), 2-D uint32 pixel mask, and extra float32 2-D datasets.
struct DectrisMetadata {
  nlohmann::json scalars = nlohmann::json::object();
  std::vector<uint32_t> pixel_mask;  // Kr × Kc, empty for none
  struct Image {
    std::string path;
    uint64_t rows = 0, cols = 0;
    std::vector<float> values;
  };
  std::vector<Image> images;
};

class DectrisWriter {
 public:
  // Creates the files (the master first, so a reader sees an acquisition being written).
  DectrisWriter(const DectrisWriterOptions& options, DType dtype, uint64_t rows, uint64_t cols, uint64_t frames,
                const DectrisMetadata& metadata);
  ~DectrisWriter();
  DectrisWriter(const DectrisWriter&) = delete;
  DectrisWriter& operator=(const DectrisWriter&) = delete;

  // Stores frame `index` (rows × cols pixels of dtype). Thread-safe; encoding runs outside the HDF5 lock.
  void write_frame(uint64_t index, const uint8_t* pixels);
  // Closes every file. Called by the destructor too (errors there are swallowed).
  void finish();
  std::string master_path() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace tmorph
