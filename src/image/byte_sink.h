// Where an encoder's bytes go: a file at a path, or memory (what the server sends; no file is written). Every
// encoder of this module writes through a ByteSink, so one encoder serves both.
//
// Contract:
// - write() appends at the position and advances it; seek() moves the position to an offset from the start, at
//   most the bytes written so far (the MP4 muxer goes back to fill in sizes); a write after a seek overwrites.
// - commit() says the bytes are complete: a file is flushed, closed and kept. A file sink destroyed without a
//   commit removes its file: a partial image or movie is worse than none.
// - Errors are Error(Io) naming the sink (the path) and the system's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tmorph {

class ByteSink {
 public:
  // Creates (truncates) `path` now, mode 0666 less the umask; Error(Io) "PATH: cannot create (reason)".
  static std::unique_ptr<ByteSink> file(const std::string& path);
  // Bytes held in memory; `name` names them in errors ("movie", "PNG image", …).
  static std::unique_ptr<ByteSink> memory(const std::string& name);

  virtual ~ByteSink() = default;
  virtual void write(const void* data, size_t size) = 0;
  virtual void seek(uint64_t offset) = 0;
  virtual void commit() = 0;
  // A memory sink's bytes (it holds none after); Error(Internal) for a file sink.
  virtual std::string take();
  // The path, or the memory sink's name.
  const std::string& name() const { return name_; }
  // Bytes from the start to the end written so far.
  virtual uint64_t size() const = 0;

 protected:
  explicit ByteSink(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

}  // namespace tmorph
