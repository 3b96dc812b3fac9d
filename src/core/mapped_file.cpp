#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/file_overlay.h"
#include "tensormorph/error.h"

namespace tmorph {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  if (auto overlay = find_overlay(path)) {
    overlay_ = std::move(overlay);
    data_ = overlay_->data();
    size_ = overlay_->size();
    return;
  }
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer; a regular file ignores it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(ErrorKind::Io, path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(ErrorKind::Io, path + ": cannot stat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorKind::Io, path + ": not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      throw Error(ErrorKind::Io, path + ": cannot map " + std::to_string(size_) +
                                     " bytes: " + std::strerror(e));
    }
    ::madvise(p, size_, MADV_SEQUENTIAL);
    data_ = static_cast<const uint8_t*>(p);
  }
  fd_ = fd;
}

MappedFile::~MappedFile() {
  if (overlay_) return;
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  ::close(fd_);
}

void MappedFile::read_at(uint64_t offset, void* out, uint64_t bytes) const {
  auto* dst = static_cast<uint8_t*>(out);
  if (overlay_) {
    if (!overlay_->read(offset, dst, bytes))
      throw Error(ErrorKind::BadInput, path_ + ": ends at offset " + std::to_string(size_) + ", expected " + std::to_string(offset + bytes) + " bytes");
    return;
  }
  for (uint64_t done = 0; done < bytes;) {
    const ssize_t n = ::pread(fd_, dst + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw Error(ErrorKind::Io, path_ + ": read failed at offset " + std::to_string(offset + done) + ": " + std::strerror(errno));
    if (n == 0)
      throw Error(ErrorKind::BadInput, path_ + ": ends at offset " + std::to_string(offset + done) + ", expected " +
                                           std::to_string(offset + bytes) + " bytes (the file shrank after it was opened)");
    done += static_cast<uint64_t>(n);
  }
}

void MappedFile::check_not_shrunk() const {
  if (overlay_) return;  // memory does not shrink
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw Error(ErrorKind::Io, path_ + ": cannot stat: " + std::strerror(errno));
  if (static_cast<uint64_t>(st.st_size) < size_)
    throw Error(ErrorKind::BadInput, path_ + ": is now " + std::to_string(st.st_size) + " bytes, " + std::to_string(size_) +
                                         " when it was opened (the file shrank): its tensors cannot be viewed; open it again");
}

void MappedFile::drop_pages(uint64_t offset, uint64_t bytes) const {
  if (!data_ || offset >= size_) return;
  bytes = std::min(bytes, size_ - offset);
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t at = reinterpret_cast<uintptr_t>(data_) + offset;
  const uintptr_t begin = (at + page - 1) & ~(page - 1), end = (at + bytes) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

void MappedFile::read_ahead(uint64_t offset, uint64_t bytes) const {
  if (overlay_) return;  // already in memory
  ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_WILLNEED);
}

}  // namespace tmorph
