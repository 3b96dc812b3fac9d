#include "image/mp4_writer.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <vector>

#include "tensormorph/error.h"
#include "tensormorph/movie_encoder_abi.h"

namespace tmorph {

namespace {

constexpr const char* kModuleFile = "libtensormorph-encoder-mp4.so";

// The module's table, opened once per directory and kept for the process's life (never closed: an encoder
// object may outlive any one writer's view of it).
const tm_movie_encoder_v1& encoder_table(const std::string& dir, const std::string& movie) {
  static std::mutex mutex;
  static std::map<std::string, const tm_movie_encoder_v1*> opened;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = opened.find(dir); it != opened.end()) return *it->second;
  const std::string module = (dir.empty() ? std::string(".") : dir) + "/" + kModuleFile;
  const auto unavailable = [&](const std::string& why) {
    return Error(ErrorKind::Unavailable, movie + ": writing MP4 needs the encoder module " + module + " (libav): " + why +
                                             "; build the tool with libav (scripts/install-deps), point TENSORMORPH_PLUGIN_DIR "
                                             "or compute.plugin_dir at the folder that holds it, or write a .gif");
  };
  void* handle = dlopen(module.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* err = dlerror();
    throw unavailable(err ? err : "dlopen failed");
  }
  const auto entry = reinterpret_cast<tm_movie_encoder_entry_fn>(dlsym(handle, TM_MOVIE_ENCODER_ENTRY_SYMBOL));
  const tm_movie_encoder_v1* table = entry ? entry(TM_MOVIE_ENCODER_ABI_VERSION) : nullptr;
  if (!table || !table->open || !table->add || !table->finish || !table->destroy) {
    dlclose(handle);
    throw unavailable(entry ? "it does not speak encoder ABI " + std::to_string(TM_MOVIE_ENCODER_ABI_VERSION)
                            : std::string("no symbol ") + TM_MOVIE_ENCODER_ENTRY_SYMBOL);
  }
  opened.emplace(dir, table);
  return *table;
}

ErrorKind kind_of(tm_movie_status status) {
  switch (status) {
    case TM_MOVIE_UNAVAILABLE: return ErrorKind::Unavailable;
    case TM_MOVIE_INVALID_ARGUMENT: return ErrorKind::InvalidArgument;
    default: return ErrorKind::Io;
  }
}

}  // namespace

struct Mp4Writer::State {
  std::string path;  // the target's name
  ByteSink* sink = nullptr;
  std::string sink_error;  // what the sink threw inside a module call, reported instead of the module's message
  tm_movie_sink c_sink{};
  const tm_movie_encoder_v1* table = nullptr;
  tm_movie_encoder* encoder = nullptr;
  std::vector<uint8_t> padded;          // one frame at the coded size
  uint32_t width = 0, height = 0, coded_w = 0, coded_h = 0;
  uint64_t frames = 0;
  bool finished = false;

  ~State() {
    if (encoder) table->destroy(encoder);
  }
  void check(tm_movie_status status, const char* message) const {
    if (status == TM_MOVIE_OK) return;
    if (!sink_error.empty()) throw Error(ErrorKind::Io, sink_error);
    throw Error(kind_of(status), message[0] ? std::string(message) : path + ": the MP4 encoder failed");
  }
  // The sink as the module's C callbacks: nothing is thrown through the module.
  static int write(void* context, const uint8_t* data, size_t size) {
    auto* s = static_cast<State*>(context);
    try {
      s->sink->write(data, size);
      return 0;
    } catch (const std::exception& e) {
      if (s->sink_error.empty()) s->sink_error = e.what();
      return 1;
    }
  }
  static int seek(void* context, uint64_t offset) {
    auto* s = static_cast<State*>(context);
    try {
      s->sink->seek(offset);
      return 0;
    } catch (const std::exception& e) {
      if (s->sink_error.empty()) s->sink_error = e.what();
      return 1;
    }
  }
};

Mp4Writer::Mp4Writer(const MovieTarget& target, uint32_t width, uint32_t height, double fps, const std::string& encoder_dir)
    : s_(std::make_unique<State>()) {
  State& s = *s_;
  const std::string& path = target.name;
  s.path = path;
  if (width == 0 || height == 0 || width > 16384 || height > 16384)
    throw Error(ErrorKind::InvalidArgument, path + ": an MP4 frame is 1..16384 pixels a side, not " + std::to_string(width) + " x " +
                                                std::to_string(height));
  if (!(fps > 0) || !std::isfinite(fps)) throw Error(ErrorKind::InvalidArgument, path + ": fps must be a positive number");
  s.width = width, s.height = height;
  s.coded_w = width + (width & 1), s.coded_h = height + (height & 1);
  s.table = &encoder_table(encoder_dir, path);
  sink_ = target.open_sink();  // a file: created here, once the module is found
  s.sink = sink_.get();
  s.c_sink = {&s, &State::write, &State::seek};
  char message[512] = {};
  s.check(s.table->open(path.c_str(), &s.c_sink, s.coded_w, s.coded_h, fps, &s.encoder, message, sizeof message), message);
  s.padded.resize(size_t{s.coded_w} * s.coded_h * 4);
}

Mp4Writer::~Mp4Writer() = default;

std::vector<std::pair<std::string, uint64_t>> Mp4Writer::facts() const {
  return {{"coded_width", s_->coded_w}, {"coded_height", s_->coded_h}};
}
uint32_t Mp4Writer::coded_width() const { return s_->coded_w; }
uint32_t Mp4Writer::coded_height() const { return s_->coded_h; }
uint64_t Mp4Writer::frames() const { return s_->frames; }

void Mp4Writer::add(const RgbaImage& frame) {
  State& s = *s_;
  if (s.finished) throw Error(ErrorKind::InvalidArgument, s.path + ": the MP4 is already finished");
  if (frame.width != s.width || frame.height != s.height)
    throw Error(ErrorKind::InvalidArgument, s.path + ": frame " + std::to_string(s.frames) + " is " + std::to_string(frame.width) + " x " +
                                                std::to_string(frame.height) + ", the movie " + std::to_string(s.width) + " x " +
                                                std::to_string(s.height));
  // Pad to even sides by repeating the last column and row.
  const size_t row = size_t{s.width} * 4, coded_row = size_t{s.coded_w} * 4;
  for (uint32_t y = 0; y < s.coded_h; ++y) {
    const uint8_t* src = frame.pixels.data() + std::min(y, s.height - 1) * row;
    uint8_t* dst = s.padded.data() + y * coded_row;
    std::memcpy(dst, src, row);
    if (s.coded_w != s.width) std::memcpy(dst + row, src + row - 4, 4);
  }
  char message[512] = {};
  s.check(s.table->add(s.encoder, s.padded.data(), message, sizeof message), message);
  ++s.frames;
}

void Mp4Writer::finish() {
  State& s = *s_;
  if (s.finished) return;
  char message[512] = {};
  s.check(s.table->finish(s.encoder, message, sizeof message), message);
  sink_->commit();
  s.finished = true;
  finished_ = true;
}

}  // namespace tmorph
