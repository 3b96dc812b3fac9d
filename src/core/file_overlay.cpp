#include "core/file_overlay.h"

#include <sys/mman.h>
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
  if (size_ == 0) return;
  void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw Error(ErrorKind::Io, path_ + ": cannot reserve " + std::to_string(size_) + " bytes of address space for its bytes in memory: " + std::strerror(errno));
  ::madvise(p, size_, MADV_HUGEPAGE);  // advisory: fewer, larger pages where transparent huge pages are on
  data_ = static_cast<uint8_t*>(p);
}

FileOverlay::~FileOverlay() {
  if (data_) ::munmap(data_, size_);
}

void FileOverlay::write(uint64_t offset, const uint8_t* from, size_t bytes) {
  if (offset > size_ || bytes > size_ - offset)
    throw Error(ErrorKind::Internal, path_ + ": bytes " + std::to_string(offset) + "+" + std::to_string(bytes) + " lie outside its " + std::to_string(size_) + " bytes");
  if (bytes) std::memcpy(data_ + offset, from, bytes);
}

void FileOverlay::prepare(uint64_t offset, uint64_t bytes) {
#ifdef MADV_POPULATE_WRITE
  if (offset >= size_) return;
  bytes = std::min(bytes, size_ - offset);
  const uint64_t page = page_bytes();
  const uint64_t first = offset / page * page, end = std::min(size_, (offset + bytes + page - 1) / page * page);
  if (end > first) ::madvise(data_ + first, end - first, MADV_POPULATE_WRITE);
#else
  (void)offset, (void)bytes;
#endif
}

void FileOverlay::release(uint64_t offset, uint64_t bytes) {
  if (offset >= size_) return;
  bytes = std::min(bytes, size_ - offset);
  const uint64_t page = page_bytes();
  const uint64_t first = (offset + page - 1) / page * page, end = (offset + bytes) / page * page;
  if (end <= first) return;
  // MADV_DONTNEED on private anonymous memory: the pages are freed and read as zeros afterwards.
  if (::madvise(data_ + first, end - first, MADV_DONTNEED) != 0)
    throw Error(ErrorKind::Io, path_ + ": cannot release bytes " + std::to_string(first) + "+" + std::to_string(end - first) + " of its memory: " + std::strerror(errno));
}

uint64_t FileOverlay::resident_bytes() const {
  if (!data_) return 0;
  const uint64_t page = page_bytes(), pages = (size_ + page - 1) / page;
  uint64_t resident = 0;
  std::vector<unsigned char> vec(static_cast<size_t>(std::min<uint64_t>(pages, 1u << 20)));
  for (uint64_t at = 0; at < pages; at += vec.size()) {
    const uint64_t n = std::min<uint64_t>(vec.size(), pages - at);
    if (::mincore(data_ + at * page, std::min(n * page, size_ - at * page), vec.data()) != 0) return 0;
    for (uint64_t i = 0; i < n; ++i) resident += (vec[i] & 1) ? page : 0;
  }
  return resident;
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
