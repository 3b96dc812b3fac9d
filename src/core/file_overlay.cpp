#include "core/file_overlay.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <vector>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

std::mutex g_overlays_mutex;
std::map<std::string, std::weak_ptr<FileOverlay>>& overlays() {
  static std::map<std::string, std::weak_ptr<FileOverlay>> by_key;
  return by_key;
}

uint64_t page_bytes() {
  static const uint64_t page = [] {
    const long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<uint64_t>(p) : 4096u;
  }();
  return page;
}

}  // namespace

FileOverlay::FileOverlay(std::string path, uint64_t size) : path_(std::move(path)), size_(size) {
  fd_ = ::memfd_create("tensormorph-overlay", MFD_CLOEXEC);
  if (fd_ < 0) throw Error(ErrorKind::Io, path_ + ": cannot create a memory file for its bytes: " + std::strerror(errno));
  if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
    const int e = errno;
    ::close(fd_);
    throw Error(ErrorKind::Io, path_ + ": cannot size a memory file to " + std::to_string(size_) + " bytes: " + std::strerror(e));
  }
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    const int e = errno;
    ::close(fd_);
    throw Error(ErrorKind::Io, path_ + ": cannot map " + std::to_string(size_) + " bytes of its memory file: " + std::strerror(e));
  }
  data_ = static_cast<const uint8_t*>(p);
}

FileOverlay::~FileOverlay() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  ::close(fd_);
}

void FileOverlay::write(uint64_t offset, const uint8_t* from, size_t bytes) {
  if (offset > size_ || bytes > size_ - offset)
    throw Error(ErrorKind::Internal, path_ + ": bytes " + std::to_string(offset) + "+" + std::to_string(bytes) + " lie outside its " + std::to_string(size_) + " bytes");
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = ::pwrite(fd_, from + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(ErrorKind::Io, path_ + ": cannot keep bytes " + std::to_string(offset + done) + "+" + std::to_string(bytes - done) + " in memory: " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

bool FileOverlay::read(uint64_t offset, void* out, uint64_t bytes) const {
  if (offset > size_ || bytes > size_ - offset) return false;
  auto* dst = static_cast<uint8_t*>(out);
  for (uint64_t done = 0; done < bytes;) {
    const ssize_t n = ::pread(fd_, dst + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<uint64_t>(n);
  }
  return true;
}

void FileOverlay::release(uint64_t offset, uint64_t bytes) {
  if (offset >= size_) return;
  bytes = std::min(bytes, size_ - offset);
  const uint64_t page = page_bytes();
  const uint64_t first = (offset + page - 1) / page * page, end = (offset + bytes) / page * page;
  if (end <= first) return;
  if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(first), static_cast<off_t>(end - first)) != 0)
    throw Error(ErrorKind::Io, path_ + ": cannot release bytes " + std::to_string(first) + "+" + std::to_string(end - first) + " of its memory: " + std::strerror(errno));
}

uint64_t FileOverlay::resident_bytes() const {
  struct stat st {};
  return ::fstat(fd_, &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
}

std::string overlay_key(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) p = path;
  return p.lexically_normal().string();
}

void register_overlay(const std::shared_ptr<FileOverlay>& overlay) {
  std::lock_guard<std::mutex> guard(g_overlays_mutex);
  overlays()[overlay_key(overlay->path())] = overlay;
}

std::shared_ptr<FileOverlay> find_overlay(const std::string& path) {
  std::lock_guard<std::mutex> guard(g_overlays_mutex);
  auto& by_key = overlays();
  if (by_key.empty()) return nullptr;
  const auto it = by_key.find(overlay_key(path));
  if (it == by_key.end()) return nullptr;
  auto held = it->second.lock();
  if (!held) by_key.erase(it);
  return held;
}

}  // namespace tmorph
