// Encoding RGBA8 images as PNG (Debian's libpng), in memory or to a file, with text metadata (tEXt chunks) so that what an
// image shows (tensor, statistic, limits, colour map) travels with it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tmorph {

struct RgbaImage {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> pixels;  // height rows of width x RGBA8, top row first
  RgbaImage() = default;
  RgbaImage(uint32_t w, uint32_t h) : width(w), height(h), pixels(size_t{w} * h * 4, 0) {}
  uint8_t* at(uint32_t x, uint32_t y) { return pixels.data() + (size_t{y} * width + x) * 4; }
  const uint8_t* at(uint32_t x, uint32_t y) const { return pixels.data() + (size_t{y} * width + x) * 4; }
};

using PngText = std::vector<std::pair<std::string, std::string>>;

// The PNG file's bytes, encoded in memory (what the server sends; no file is written). `name` names the image in
// errors. Throws InvalidArgument for an empty image, Io when libpng fails.
std::string encode_png(const RgbaImage& image, const PngText& text, const std::string& name = "PNG image");

// encode_png, written to path. Throws Error(Io) naming the path when the file cannot be written, InvalidArgument
// for an empty image.
void write_png(const std::string& path, const RgbaImage& image, const PngText& text);

}  // namespace tmorph
