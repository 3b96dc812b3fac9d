#include "image/byte_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

std::string reason() { return std::strerror(errno); }

class FileSink final : public ByteSink {
 public:
  explicit FileSink(const std::string& path) : ByteSink(path) {
    // open(2) with 0666 (the umask applies), as any tool writing an image does.
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd_ < 0) throw Error(ErrorKind::Io, path + ": cannot create (" + reason() + ")");
  }
  ~FileSink() override {
    if (fd_ < 0) return;
    ::close(fd_);
    std::remove(name().c_str());  // never committed: a partial file is removed
  }
  void write(const void* data, size_t size) override {
    if (fd_ < 0) throw Error(ErrorKind::Internal, name() + ": written after it was committed");
    const char* p = static_cast<const char*>(data);
    while (size > 0) {
      const ssize_t n = ::pwrite(fd_, p, size, static_cast<off_t>(pos_));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw Error(ErrorKind::Io, name() + ": write failed at byte " + std::to_string(pos_) + " (" + reason() + ")");
      p += n, size -= static_cast<size_t>(n), pos_ += static_cast<uint64_t>(n);
      end_ = std::max(end_, pos_);
    }
  }
  void seek(uint64_t offset) override {
    if (offset > end_)
      throw Error(ErrorKind::Internal, name() + ": seek to byte " + std::to_string(offset) + " past the " + std::to_string(end_) + " written");
    pos_ = offset;
  }
  void commit() override {
    if (fd_ < 0) return;
    const int fd = fd_;
    fd_ = -1;  // kept whatever follows: close reports the error, the file is the caller's to judge
    if (::close(fd) != 0) {
      std::remove(name().c_str());
      throw Error(ErrorKind::Io, name() + ": write failed when closing (" + reason() + ")");
    }
  }
  uint64_t size() const override { return end_; }

 private:
  int fd_ = -1;
  uint64_t pos_ = 0, end_ = 0;
};

class MemorySink final : public ByteSink {
 public:
  explicit MemorySink(const std::string& name) : ByteSink(name) {}
  void write(const void* data, size_t size) override {
    const char* p = static_cast<const char*>(data);
    const size_t overlap = std::min<size_t>(size, bytes_.size() - pos_);
    std::copy_n(p, overlap, bytes_.begin() + static_cast<std::ptrdiff_t>(pos_));
    bytes_.append(p + overlap, size - overlap);
    pos_ += size;
  }
  void seek(uint64_t offset) override {
    if (offset > bytes_.size())
      throw Error(ErrorKind::Internal,
                  name() + ": seek to byte " + std::to_string(offset) + " past the " + std::to_string(bytes_.size()) + " written");
    pos_ = static_cast<size_t>(offset);
  }
  void commit() override {}
  std::string take() override {
    pos_ = 0;
    std::string out = std::move(bytes_);
    bytes_.clear();
    return out;
  }
  uint64_t size() const override { return bytes_.size(); }

 private:
  std::string bytes_;
  size_t pos_ = 0;
};

}  // namespace

std::string ByteSink::take() { throw Error(ErrorKind::Internal, name_ + ": a file sink holds no bytes in memory"); }

std::unique_ptr<ByteSink> ByteSink::file(const std::string& path) { return std::make_unique<FileSink>(path); }
std::unique_ptr<ByteSink> ByteSink::memory(const std::string& name) { return std::make_unique<MemorySink>(name); }

}  // namespace tmorph
