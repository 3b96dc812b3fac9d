// An RGBA8 image in memory: what every encoder of this module takes (png_encoder.h, gif_writer.h, mp4_writer.h) and what
// the renderers draw into.
#pragma once

#include <cstddef>
#include <cstdint>
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

}  // namespace tmorph
