// Writing RGBA8 frames as an MP4 movie: H.264 through libavcodec's libx264 encoder, yuv420p, constant fps.
// The encoding runs in the MP4 encoder module (libtensormorph-encoder-mp4.so, include/tensormorph/movie_encoder_abi.h),
// opened from `encoder_dir` (the plugin directory) on first use, so libav loads only in a process that writes an MP4.
//
// Contract:
// - Frames are opaque (alpha dropped). yuv420p needs even sides: a frame of odd width or height is padded
//   by one column / row repeating its last one; coded_width()/coded_height() report the movie's size.
// - No module in `encoder_dir`, or one that speaks another version: Error Unavailable naming the module's path and
//   the loader's reason.
// - Lossy: colours come back within the codec's error (CRF 16, 4:2:0 chroma), not exactly.
// - Every frame has the first frame's size. Errors are Error naming the path and what failed: Unavailable
//   when this libavcodec has no libx264 encoder, Io when the file cannot be written (libav's reason). The
//   destructor of an unfinished writer removes the partial file.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "render/png_write.h"

namespace tmorph {

class Mp4Writer {
 public:
  // Creates `path`; fps > 0 and finite (time base 1/fps, rational to 1/1000).
  Mp4Writer(const std::string& path, uint32_t width, uint32_t height, double fps, const std::string& encoder_dir);
  ~Mp4Writer();
  Mp4Writer(const Mp4Writer&) = delete;
  Mp4Writer& operator=(const Mp4Writer&) = delete;

  void add(const RgbaImage& frame);
  // Drains the encoder, writes the index (moov) and closes the file.
  void finish();
  uint32_t coded_width() const;
  uint32_t coded_height() const;
  uint64_t frames() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace tmorph
