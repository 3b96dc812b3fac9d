// TIFF files of numbers (Debian's libtiff): a product's exact samples for the tools microscopists open first
// (Fiji/ImageJ, DigitalMicrograph, tifffile), where a PNG would carry colours and a .npy needs numpy.
//
// Contract:
// - One page per [rows, cols] plane; a raster of shape [pages, rows, cols] is `pages` pages (a vector field's two
//   components), each minisblack, one sample per pixel, uncompressed, strips of whole rows.
// - Samples are written as given (host byte order; libtiff records it): unsigned 8/16/32/64-bit integers or IEEE
//   32/64-bit floats (SampleFormat 1 or 3).
// - Tags: ImageDescription (the caller's text, e.g. JSON), Software "tensormorph", and when pixels_per_cm is given
//   XResolution = YResolution = it with ResolutionUnit centimetre (the pixel size as TIFF states it).
// - BigTIFF when the samples exceed 2 GiB, classic TIFF otherwise.
// - Failures throw Error(Io) naming the path and libtiff's message; a malformed raster Error(Internal). A failed
//   write leaves no file behind.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tmorph {

struct TiffRaster {
  enum class Sample { unsigned_integer, ieee_float };
  uint32_t pages = 1, rows = 0, cols = 0;
  Sample sample = Sample::unsigned_integer;
  uint32_t bits = 0;           // 8, 16, 32 or 64 (floats: 32 or 64)
  const void* data = nullptr;  // pages x rows x cols samples, row-major
};

struct TiffTags {
  std::string description;
  std::optional<double> pixels_per_cm;  // square pixels; absent: no resolution tags
};

void write_tiff(const std::string& path, const TiffRaster& raster, const TiffTags& tags);

}  // namespace tmorph
