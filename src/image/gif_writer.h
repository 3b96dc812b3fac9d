// The GIF movie writer (movie_writer.h): RGBA8 frames as an animated GIF (giflib), looping forever (the NETSCAPE2.0
// extension), to a file or to memory.
//
// Contract:
// - Frames are opaque: alpha is dropped. Every frame gets its own palette of the colours it holds (no
//   dithering): a frame of at most 256 distinct R, G, B colours decodes exactly to its input. A frame with
//   more keeps its 256 most frequent colours and draws each other colour as its nearest kept one (Euclidean
//   RGB); inexact_frames() counts such frames and max_error() is the largest channel difference drawn.
// - Every frame has the first frame's size; the delay is round(100 / fps) centiseconds (at least 2: viewers
//   show shorter delays as 10), reported by delay_cs().
// - Errors are Error(Io) naming the target and giflib's (or the sink's) reason; the destructor of an unfinished
//   writer removes the partial file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "image/movie_writer.h"

namespace tmorph {

class GifWriter final : public MovieWriter {
 public:
  // Opens the target (a file is created: Error(Io) when it cannot be); sides 1..65535, fps > 0 and finite.
  GifWriter(const MovieTarget& target, uint32_t width, uint32_t height, double fps);
  ~GifWriter() override;

  void add(const RgbaImage& frame) override;
  // Writes the trailer and completes the target; the writer takes no more frames.
  void finish() override;
  uint64_t frames() const override;
  MovieFormat format() const override { return MovieFormat::gif; }
  std::string codec() const override { return "gif"; }
  std::vector<std::pair<std::string, uint64_t>> facts() const override;  // delay_cs, inexact_frames, max_error
  uint32_t delay_cs() const;
  uint64_t inexact_frames() const;
  uint32_t max_error() const;  // 0..255, over every frame

  struct State;  // the implementation's (giflib's output callback reaches it)

 private:
  std::unique_ptr<State> s_;
};

}  // namespace tmorph
