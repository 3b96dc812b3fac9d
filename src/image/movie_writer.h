// The movie writer interface: RGBA8 frames in, one at a time, a movie out (a file at a path, or bytes in memory).
// GIF (gif_writer.h, exact colours) and MP4 (mp4_writer.h, H.264) are its two writers; open_movie_writer picks one
// by the target's format.
//
// Contract (every writer):
// - Every frame has the size given when the writer was opened (InvalidArgument naming the frame otherwise);
//   alpha is dropped (frames are opaque).
// - finish() completes the movie: the file is closed and kept, or the bytes are ready for take_bytes(). A writer
//   destroyed unfinished leaves no file.
// - Errors are Error naming the target (its path, or its name in memory) and what failed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "image/byte_sink.h"
#include "image/rgba_image.h"

namespace tmorph {

enum class MovieFormat { gif, mp4 };

std::string_view movie_format_name(MovieFormat f);  // "gif", "mp4"

// By the path's extension, .gif or .mp4 (any case); Error(InvalidArgument) naming the path otherwise.
MovieFormat movie_format(const std::string& path);

// Where a movie goes. `name` names it in errors: the path, or what the caller calls the bytes.
struct MovieTarget {
  MovieFormat format = MovieFormat::gif;
  std::string path;  // empty: memory
  std::string name;
  static MovieTarget file(const std::string& path);  // the format by the extension (movie_format)
  static MovieTarget memory(MovieFormat format, const std::string& name);
  bool in_memory() const { return path.empty(); }
  // The sink the writer writes through (created when the writer opens: a file is created then).
  std::unique_ptr<ByteSink> open_sink() const;
};

class MovieWriter {
 public:
  virtual ~MovieWriter() = default;
  MovieWriter(const MovieWriter&) = delete;
  MovieWriter& operator=(const MovieWriter&) = delete;

  virtual void add(const RgbaImage& frame) = 0;
  virtual void finish() = 0;
  virtual uint64_t frames() const = 0;
  virtual MovieFormat format() const = 0;
  // For people: "gif", "h264 (libx264, yuv420p)".
  virtual std::string codec() const = 0;
  // What the format reports about the movie written, as named unsigned numbers (GIF: delay_cs, inexact_frames,
  // max_error; MP4: coded_width, coded_height).
  virtual std::vector<std::pair<std::string, uint64_t>> facts() const = 0;
  // A finished movie's bytes, for a memory target (Error(Internal) for a file, or before finish()).
  std::string take_bytes();

 protected:
  MovieWriter() = default;
  // The writer's sink, once it is open (the encoders write through it).
  std::unique_ptr<ByteSink> sink_;
  bool finished_ = false;
};

// The writer for target.format: GifWriter, or Mp4Writer with the encoder module in `encoder_dir` (the plugin
// directory). Throws what their constructors throw.
std::unique_ptr<MovieWriter> open_movie_writer(const MovieTarget& target, uint32_t width, uint32_t height, double fps,
                                               const std::string& encoder_dir);

}  // namespace tmorph
