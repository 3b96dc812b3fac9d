// Writing RGBA8 frames as an animated GIF (giflib), looping forever (the NETSCAPE2.0 extension).
//
// Contract:
// - Frames are opaque: alpha is dropped. Every frame gets its own palette of the colours it holds (no
//   dithering): a frame of at most 256 distinct R, G, B colours decodes exactly to its input. A frame with
//   more keeps its 256 most frequent colours and draws each other colour as its nearest kept one (Euclidean
//   RGB); inexact_frames() counts such frames and max_error() is the largest channel difference drawn.
// - Every frame has the first frame's size; the delay is round(100 / fps) centiseconds (at least 2: viewers
//   show shorter delays as 10), reported by delay_cs().
// - Errors are Error(Io) naming the path and giflib's reason; the destructor of an unfinished writer
//   removes the partial file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "render/png_write.h"

namespace tmorph {

class GifWriter {
 public:
  // Creates `path` (Error(Io) when it cannot be created); fps > 0 and finite.
  GifWriter(const std::string& path, uint32_t width, uint32_t height, double fps);
  ~GifWriter();
  GifWriter(const GifWriter&) = delete;
  GifWriter& operator=(const GifWriter&) = delete;

  void add(const RgbaImage& frame);
  // Writes the trailer and closes the file; the writer takes no more frames.
  void finish();
  uint32_t delay_cs() const;
  uint64_t frames() const;
  uint64_t inexact_frames() const;
  uint32_t max_error() const;  // 0..255, over every frame

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace tmorph
