#include "remote/mirror_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "core/file_overlay.h"
#include "tensormorph/error.h"
#include "tensormorph/settings.h"

namespace tmorph::remote {

namespace fs = std::filesystem;

std::string mirror_path(const RemoteUrl& u) {
  std::string host = u.host;
  for (auto& ch : host)
    if (ch == ':' || ch == '[' || ch == ']') ch = '_';
  const std::string scheme = u.url.substr(0, u.url.find("://"));
  return cache_dir() + "/remote/" + scheme + "/" + host + u.path;  // u.path: checked segments, no '..'
}

MirrorFile::MirrorFile(std::string path, const RemoteIdentity& id) : path_(std::move(path)), id_(id) {
  std::error_code ec;
  fs::create_directories(fs::path(path_).parent_path(), ec);
  if (ec) throw Error(ErrorKind::Io, fs::path(path_).parent_path().string() + ": cannot create the remote files' folder: " + ec.message());
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(ErrorKind::Io, path_ + ": cannot create the stand-in of " + id.url + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw Error(ErrorKind::Io, path_ + ": the stand-in of " + id.url + " is not a regular file");
  }
  // A stand-in of another size (the remote file changed): emptied first, so no old byte survives.
  if (static_cast<uint64_t>(st.st_size) != id.size && ::ftruncate(fd_, 0) != 0) {
    ::close(fd_);
    throw Error(ErrorKind::Io, path_ + ": cannot truncate: " + std::strerror(errno));
  }
  if (::ftruncate(fd_, static_cast<off_t>(id.size)) != 0) {
    const int e = errno;
    ::close(fd_);
    throw Error(ErrorKind::Io, path_ + ": cannot size the stand-in to " + std::to_string(id.size) + " bytes: " + std::strerror(e));
  }
  restamp();
  // One overlay per path in a process: a second stand-in of the same file (diff X X, two checkpoints sharing a
  // shard) fetches into the overlay the first one's readers map.
  overlay_ = find_overlay(path_);
  if (overlay_ && overlay_->size() == id.size) return;
  try {
    overlay_ = std::make_shared<FileOverlay>(path_, id.size);
    copy_data_into_overlay();
  } catch (...) {
    ::close(fd_);
    throw;
  }
  register_overlay(overlay_);
}

MirrorFile::~MirrorFile() {
  if (fd_ >= 0) ::close(fd_);
}

void MirrorFile::copy_data_into_overlay() {
  // The file's data extents (its headers; a stand-in an older version left may hold tensor bytes too, which are
  // fetched again before they are read) into the overlay.
  std::vector<uint8_t> buffer;
  for (off_t at = 0; static_cast<uint64_t>(at) < id_.size;) {
    const off_t data = ::lseek(fd_, at, SEEK_DATA);
    if (data < 0) break;  // ENXIO: no data past `at`
    off_t hole = ::lseek(fd_, data, SEEK_HOLE);
    if (hole < 0) hole = static_cast<off_t>(id_.size);
    for (off_t o = data; o < hole;) {
      const size_t want = static_cast<size_t>(std::min<off_t>(hole - o, 4 << 20));
      buffer.resize(want);
      const ssize_t n = ::pread(fd_, buffer.data(), want, o);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(ErrorKind::Io, path_ + ": cannot read the stand-in at offset " + std::to_string(o) + ": " + std::strerror(errno));
      if (n == 0) break;
      overlay_->write(static_cast<uint64_t>(o), buffer.data(), static_cast<size_t>(n));
      o += n;
    }
    at = hole;
  }
}

void MirrorFile::write(uint64_t offset, const uint8_t* data, size_t bytes) { overlay_->write(offset, data, bytes); }

void MirrorFile::write_header(uint64_t offset, const uint8_t* data, size_t bytes) {
  write(offset, data, bytes);
  for (size_t done = 0; done < bytes;) {
    const ssize_t n = ::pwrite(fd_, data + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(ErrorKind::Io, path_ + ": cannot write the bytes of " + id_.url + " at offset " + std::to_string(offset + done) + ": " + std::strerror(errno));
    done += static_cast<size_t>(n);
  }
}

void MirrorFile::release(uint64_t offset, uint64_t bytes) {
  // Whole pages only: their other bytes may be a header or another tensor still in use.
  overlay_->release(offset, bytes);
}

void MirrorFile::restamp() {
  // Last-Modified to the second; the ETag's hash as nanoseconds, so a changed ETag is a changed identity.
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = static_cast<time_t>(id_.last_modified_s);
  times[0].tv_nsec = times[1].tv_nsec = static_cast<long>(std::hash<std::string>{}(id_.etag + "|" + id_.last_modified) % 1000000000ull);
  if (::futimens(fd_, times) != 0) throw Error(ErrorKind::Io, path_ + ": cannot set its time: " + std::strerror(errno));
}

void write_mirror_sidecar(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  const std::string tmp = path + ".part";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(ErrorKind::Io, tmp + ": cannot create: " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = errno;
      ::close(fd);
      throw Error(ErrorKind::Io, tmp + ": cannot write: " + std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  fs::rename(tmp, path, ec);
  if (ec) throw Error(ErrorKind::Io, path + ": cannot replace: " + ec.message());
}

namespace {

// The process's held folder locks: lock file -> (descriptor, holders).
std::mutex g_locks_mutex;
std::map<std::string, std::pair<int, int>>& held_locks() {
  static std::map<std::string, std::pair<int, int>> held;
  return held;
}

}  // namespace

bool MirrorLock::held_here(const std::string& folder) {
  std::lock_guard<std::mutex> guard(g_locks_mutex);
  return held_locks().count(folder + "/.tensormorph-remote.lock") != 0;
}

MirrorLock::MirrorLock(const std::string& folder, Kind kind)
    : path_(folder + (kind == Kind::Use ? "/.tensormorph-remote.lock" : "/.tensormorph-headers.lock")) {
  std::lock_guard<std::mutex> guard(g_locks_mutex);
  auto& held = held_locks();
  if (auto it = held.find(path_); it != held.end()) {
    ++it->second.second;
    return;
  }
  std::error_code ec;
  fs::create_directories(folder, ec);
  const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(ErrorKind::Io, path_ + ": cannot open the lock: " + std::strerror(errno));
  while (::flock(fd, kind == Kind::Use ? LOCK_SH : LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int e = errno;
    ::close(fd);
    throw Error(ErrorKind::Io, path_ + ": cannot lock: " + std::strerror(e));
  }
  held[path_] = {fd, 1};
}

MirrorLock::~MirrorLock() {
  std::lock_guard<std::mutex> guard(g_locks_mutex);
  auto& held = held_locks();
  const auto it = held.find(path_);
  if (it == held.end() || --it->second.second > 0) return;
  ::close(it->second.first);
  held.erase(it);
}

}  // namespace tmorph::remote
