// The MP4 movie writer (movie_writer.h): RGBA8 frames as an MP4 movie, H.264 through libavcodec's libx264 encoder,
// yuv420p, constant fps, to a file or to memory (the module writes through this writer's sink).
// The encoding runs in the MP4 encoder module (libtensormorph-encoder-mp4.so, include/tensormorph/movie_encoder_abi.h),
// opened from `encoder_dir` (the plugin directory) on first use, so libav loads only in a process that writes an MP4.
//
// Contract:
// - Frames are opaque (alpha dropped). yuv420p needs even sides: a frame of odd width or height is padded
//   by one column / row repeating its last one; coded_width()/coded_height() report the movie's size.
// - No module in `encoder_dir`, or one that speaks another version: Error Unavailable naming the module's path and
//   the loader's reason; nothing is created.
// - Lossy: colours come back within the codec's error (CRF 16, 4:2:0 chroma), not exactly.
// - Every frame has the first frame's size. Errors are Error naming the target and what failed: Unavailable
//   when this libavcodec has no libx264 encoder, Io when the file cannot be written (the sink's reason, else
//   libav's). The destructor of an unfinished writer removes the partial file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "image/movie_writer.h"

namespace tmorph {

class Mp4Writer final : public MovieWriter {
 public:
  // Opens the target (a file is created once the module is found); sides 1..16384, fps > 0 and finite (time base
  // 1/fps, rational to 1/1000).
  Mp4Writer(const MovieTarget& target, uint32_t width, uint32_t height, double fps, const std::string& encoder_dir);
  ~Mp4Writer() override;

  void add(const RgbaImage& frame) override;
  // Drains the encoder, writes the index (moov) and completes the target.
  void finish() override;
  uint64_t frames() const override;
  MovieFormat format() const override { return MovieFormat::mp4; }
  std::string codec() const override { return "h264 (libx264, yuv420p)"; }
  std::vector<std::pair<std::string, uint64_t>> facts() const override;  // coded_width, coded_height
  uint32_t coded_width() const;
  uint32_t coded_height() const;

  struct State;  // the implementation's (the sink's callbacks reach it)

 private:
  std::unique_ptr<State> s_;
};

}  // namespace tmorph
