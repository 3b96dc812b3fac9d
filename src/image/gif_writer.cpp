#include "image/gif_writer.h"

#include <gif_lib.h>

#include <algorithm>
#include <cmath>
#include <climits>
#include <cstdlib>
#include <exception>
#include <unordered_map>
#include <vector>

#include "tensormorph/error.h"

namespace tmorph {

struct GifWriter::State {
  std::string path;  // the target's name (its path, or what memory is called)
  ByteSink* sink = nullptr;
  std::string sink_error;  // what the sink threw inside giflib's output callback, rethrown after giflib returns
  GifFileType* gif = nullptr;
  uint32_t width = 0, height = 0, delay = 0;
  uint64_t frames = 0, inexact = 0;
  uint32_t max_error = 0;

  // An unfinished movie (a throw in the constructor or add, or no finish()) is closed here; its sink, left
  // uncommitted, removes a file: a partial movie is worse than none.
  ~State() {
    if (!gif) return;
    int err = 0;
    EGifCloseFile(gif, &err);
  }
  [[noreturn]] void fail(const std::string& what, int code) const {
    if (!sink_error.empty()) throw Error(ErrorKind::Io, sink_error);
    const char* reason = GifErrorString(code);  // null for a code giflib does not name
    throw Error(ErrorKind::Io, path + ": " + what + " (giflib: " + (reason ? reason : "error " + std::to_string(code)) + ")");
  }
  void check(int rc, const std::string& what) const {
    if (rc != GIF_OK) fail(what, gif ? gif->Error : 0);
  }
};

namespace {

// giflib's output function: the bytes go to the sink. Nothing may be thrown through giflib (C): a failure is
// kept and reported as a short write, which giflib turns into an error the writer then names.
int write_to_sink(GifFileType* gif, const GifByteType* data, int length) {
  auto* s = static_cast<GifWriter::State*>(gif->UserData);
  try {
    s->sink->write(data, static_cast<size_t>(length));
    return length;
  } catch (const std::exception& e) {
    if (s->sink_error.empty()) s->sink_error = e.what();
    return 0;
  }
}

uint32_t rgb_key(const uint8_t* p) { return uint32_t{p[0]} << 16 | uint32_t{p[1]} << 8 | p[2]; }

struct MapDeleter {
  void operator()(ColorMapObject* m) const { GifFreeMapObject(m); }
};

}  // namespace

GifWriter::GifWriter(const MovieTarget& target, uint32_t width, uint32_t height, double fps) : s_(std::make_unique<State>()) {
  const std::string& path = target.name;
  s_->path = path;
  if (width == 0 || height == 0 || width > 65535 || height > 65535)
    throw Error(ErrorKind::InvalidArgument, path + ": a GIF frame is 1..65535 pixels a side, not " + std::to_string(width) + " x " +
                                                std::to_string(height));
  if (!(fps > 0) || !std::isfinite(fps)) throw Error(ErrorKind::InvalidArgument, path + ": fps must be a positive number");
  s_->width = width, s_->height = height;
  s_->delay = static_cast<uint32_t>(std::clamp(std::lround(100.0 / fps), 2L, 65535L));
  sink_ = target.open_sink();  // a file: created here (ByteSink::file: 0666 less the umask)
  s_->sink = sink_.get();
  int err = 0;
  s_->gif = EGifOpen(s_.get(), write_to_sink, &err);
  if (!s_->gif) s_->fail("cannot start the GIF", err);
  EGifSetGifVersion(s_->gif, true);
  s_->check(EGifPutScreenDesc(s_->gif, static_cast<int>(width), static_cast<int>(height), 8, 0, nullptr), "cannot write the screen descriptor");
  // NETSCAPE2.0 application extension: loop count 0 = forever.
  static const char kApp[] = "NETSCAPE2.0";
  static const unsigned char kLoop[3] = {1, 0, 0};
  s_->check(EGifPutExtensionLeader(s_->gif, APPLICATION_EXT_FUNC_CODE), "cannot write the loop extension");
  s_->check(EGifPutExtensionBlock(s_->gif, 11, kApp), "cannot write the loop extension");
  s_->check(EGifPutExtensionBlock(s_->gif, 3, kLoop), "cannot write the loop extension");
  s_->check(EGifPutExtensionTrailer(s_->gif), "cannot write the loop extension");
}

GifWriter::~GifWriter() = default;

std::vector<std::pair<std::string, uint64_t>> GifWriter::facts() const {
  return {{"delay_cs", s_->delay}, {"inexact_frames", s_->inexact}, {"max_error", s_->max_error}};
}
uint32_t GifWriter::delay_cs() const { return s_->delay; }
uint64_t GifWriter::frames() const { return s_->frames; }
uint64_t GifWriter::inexact_frames() const { return s_->inexact; }
uint32_t GifWriter::max_error() const { return s_->max_error; }

void GifWriter::add(const RgbaImage& frame) {
  State& s = *s_;
  if (!s.gif) throw Error(ErrorKind::InvalidArgument, s.path + ": the GIF is already finished");
  if (frame.width != s.width || frame.height != s.height)
    throw Error(ErrorKind::InvalidArgument, s.path + ": frame " + std::to_string(s.frames) + " is " + std::to_string(frame.width) + " x " +
                                                std::to_string(frame.height) + ", the movie " + std::to_string(s.width) + " x " +
                                                std::to_string(s.height));
  // The exact palette: the colours in order of first appearance, with their counts.
  const size_t n = size_t{s.width} * s.height;
  std::unordered_map<uint32_t, uint64_t> count;
  for (size_t i = 0; i < n; ++i) ++count[rgb_key(frame.pixels.data() + 4 * i)];
  std::vector<uint32_t> colours;
  colours.reserve(count.size());
  for (const auto& [key, c] : count) colours.push_back(key);
  if (colours.size() > 256) {  // keep the 256 most frequent; the rest become their nearest kept colour
    std::sort(colours.begin(), colours.end(), [&](uint32_t a, uint32_t b) { return count[a] != count[b] ? count[a] > count[b] : a < b; });
    ++s.inexact;
  }
  std::sort(colours.begin(), colours.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(colours.size(), 256)));
  std::unordered_map<uint32_t, uint8_t> index_of;
  for (size_t k = 0; k < colours.size(); ++k) {
    if (k < 256) {
      index_of[colours[k]] = static_cast<uint8_t>(k);
      continue;
    }
    size_t best = 0;
    int best_d = INT32_MAX, best_err = 0;
    for (size_t j = 0; j < 256; ++j) {
      int d = 0, e = 0;
      for (int sh : {16, 8, 0}) {
        const int diff = static_cast<int>((colours[k] >> sh) & 255) - static_cast<int>((colours[j] >> sh) & 255);
        d += diff * diff, e = std::max(e, std::abs(diff));
      }
      if (d < best_d) best_d = d, best = j, best_err = e;
    }
    index_of[colours[k]] = static_cast<uint8_t>(best);
    s.max_error = std::max<uint32_t>(s.max_error, static_cast<uint32_t>(best_err));
  }
  colours.resize(std::min<size_t>(colours.size(), 256));
  std::vector<GifByteType> indices(n);
  for (size_t i = 0; i < n; ++i) indices[i] = index_of[rgb_key(frame.pixels.data() + 4 * i)];
  int bits = 1;
  while ((size_t{1} << bits) < colours.size()) ++bits;
  std::unique_ptr<ColorMapObject, MapDeleter> map(GifMakeMapObject(1 << bits, nullptr));
  if (!map) throw Error(ErrorKind::Io, s.path + ": out of memory for a palette");
  for (size_t k = 0; k < colours.size(); ++k)
    map->Colors[k] = GifColorType{static_cast<GifByteType>(colours[k] >> 16), static_cast<GifByteType>(colours[k] >> 8),
                                  static_cast<GifByteType>(colours[k])};
  GraphicsControlBlock gcb{};
  gcb.DisposalMode = DISPOSE_DO_NOT;
  gcb.UserInputFlag = false;
  gcb.DelayTime = static_cast<int>(s.delay);
  gcb.TransparentColor = NO_TRANSPARENT_COLOR;
  GifByteType ext[4];
  EGifGCBToExtension(&gcb, ext);
  s.check(EGifPutExtension(s.gif, GRAPHICS_EXT_FUNC_CODE, 4, ext), "cannot write frame " + std::to_string(s.frames));
  s.check(EGifPutImageDesc(s.gif, 0, 0, static_cast<int>(s.width), static_cast<int>(s.height), false, map.get()),
          "cannot write frame " + std::to_string(s.frames));
  for (uint32_t y = 0; y < s.height; ++y)
    s.check(EGifPutLine(s.gif, indices.data() + size_t{y} * s.width, static_cast<int>(s.width)), "cannot write frame " + std::to_string(s.frames));
  ++s.frames;
}

void GifWriter::finish() {
  State& s = *s_;
  if (!s.gif) return;
  int err = 0;
  const int rc = EGifCloseFile(s.gif, &err);  // frees the handle either way
  s.gif = nullptr;
  if (rc != GIF_OK) s.fail("cannot finish the file", err);  // the uncommitted sink removes a file
  sink_->commit();
  finished_ = true;
}

}  // namespace tmorph
