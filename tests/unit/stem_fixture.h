// Helpers for the 4D-STEM tests: a private temporary folder, acquisitions written through the HDF5
// library (Tensormorph's encoder or the installed bitshuffle filter), and HDF5's own decode of a
// dataset (the reference the fast path must equal byte for byte).
#pragma once

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "formats/hdf5_util.h"
#include "stem/formats/dectris_writer.h"
#include "tensormorph/dtype.h"

namespace tmorph::test {

// A folder removed when the object dies.
class TempFolder {
 public:
  explicit TempFolder(const std::string& name) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("tm-stem-" + name + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// Overwrites 8 bytes of the LZ4 stream of `frame`'s first block (a chunk of data file f) in place, so decoding it
// fails.
inline void corrupt_stored_frame(const std::string& f, uint64_t frame) {
  haddr_t addr = 0;
  {
    auto guard = h5::lock();
    h5::Handle file = h5::open_file(f);
    h5::Handle ds(H5Dopen2(file.get(), "entry/data/data", H5P_DEFAULT), H5Dclose);
    const hsize_t coord[3] = {frame, 0, 0};
    unsigned mask = 0;
    hsize_t size = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(ds.get(), coord, &mask, &addr, &size), 0);
  }
  std::fstream io(f, std::ios::in | std::ios::out | std::ios::binary);
  io.seekp(static_cast<std::streamoff>(addr + 16));
  const char junk[8] = {'\xff', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff', '\xff'};
  io.write(junk, 8);
}

// Detector-like pixels: mostly small counts and zeros, some large values and the occasional maximum.
inline std::vector<uint8_t> detector_pixels(DType dtype, uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t w = dtype_size(dtype);
  const uint64_t max = w == 1 ? 0xFF : w == 2 ? 0xFFFF : 0xFFFFFFFFull;
  std::vector<uint8_t> out(n * w);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t r = rng() % 100;
    uint64_t v = r < 60 ? 0 : r < 95 ? rng() % 8 : r < 99 ? rng() % (max + 1) : max;
    std::memcpy(out.data() + i * w, &v, w);
  }
  return out;
}

// Writes `frames` frames of pixels (frame f = detector_pixels(seed + f)) and returns the master path.
inline std::string write_frames(const DectrisWriterOptions& o, DType dtype, uint64_t rows, uint64_t cols, uint64_t frames,
                                const DectrisMetadata& meta = {}, uint64_t seed = 1) {
  DectrisWriter w(o, dtype, rows, cols, frames, meta);
  for (uint64_t f = 0; f < frames; ++f) w.write_frame(f, detector_pixels(dtype, rows * cols, seed + f).data());
  w.finish();
  return w.master_path();
}

// Every frame of dataset `path` in `file`, decoded by the HDF5 library (and its filter plugins).
inline std::vector<uint8_t> hdf5_decode(const std::string& file, const std::string& path, size_t element_size) {
  auto guard = h5::lock();
  h5::Handle f = h5::open_file(file);
  h5::Handle d(H5Dopen2(f.get(), path.c_str(), H5P_DEFAULT), H5Dclose);
  EXPECT_TRUE(d.valid()) << file << ":" << path;
  h5::Handle space(H5Dget_space(d.get()), H5Sclose);
  const hssize_t n = H5Sget_simple_extent_npoints(space.get());
  std::vector<uint8_t> out(static_cast<size_t>(n) * element_size);
  const hid_t mem = element_size == 1 ? H5T_NATIVE_UINT8 : element_size == 2 ? H5T_NATIVE_UINT16 : H5T_NATIVE_UINT32;
  EXPECT_GE(H5Dread(d.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0) << h5::last_error();
  return out;
}

}  // namespace tmorph::test
