#include "image/movie_writer.h"

#include <algorithm>
#include <cctype>

#include "image/gif_writer.h"
#include "image/mp4_writer.h"
#include "tensormorph/error.h"

namespace tmorph {

std::string_view movie_format_name(MovieFormat f) { return f == MovieFormat::gif ? "gif" : "mp4"; }

MovieFormat movie_format(const std::string& path) {
  const size_t dot = path.find_last_of('.');
  std::string ext = dot == std::string::npos || path.find('/', dot) != std::string::npos ? "" : path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext == "gif") return MovieFormat::gif;
  if (ext == "mp4") return MovieFormat::mp4;
  throw Error(ErrorKind::InvalidArgument, path + ": a movie is written as .gif or .mp4 (the extension chooses)");
}

MovieTarget MovieTarget::file(const std::string& path) { return {movie_format(path), path, path}; }

MovieTarget MovieTarget::memory(MovieFormat format, const std::string& name) { return {format, "", name}; }

std::unique_ptr<ByteSink> MovieTarget::open_sink() const { return in_memory() ? ByteSink::memory(name) : ByteSink::file(path); }

std::string MovieWriter::take_bytes() {
  if (!sink_ || !finished_) throw Error(ErrorKind::Internal, "a movie's bytes are taken once it is finished");
  return sink_->take();
}

std::unique_ptr<MovieWriter> open_movie_writer(const MovieTarget& target, uint32_t width, uint32_t height, double fps,
                                               const std::string& encoder_dir) {
  if (target.format == MovieFormat::gif) return std::make_unique<GifWriter>(target, width, height, fps);
  return std::make_unique<Mp4Writer>(target, width, height, fps, encoder_dir);
}

}  // namespace tmorph
