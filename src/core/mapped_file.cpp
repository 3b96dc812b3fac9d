#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tensormorph/error.h"

namespace tmorph {

MappedFile::MappedFile(const std::string& path) : path_(path) {
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
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  ::close(fd_);
}

void MappedFile::read_at(uint64_t offset, void* out, uint64_t bytes) const {
  auto* dst = static_cast<uint8_t*>(out);
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
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw Error(ErrorKind::Io, path_ + ": cannot stat: " + std::strerror(errno));
  if (static_cast<uint64_t>(st.st_size) < size_)
    throw Error(ErrorKind::BadInput, path_ + ": is now " + std::to_string(st.st_size) + " bytes, " + std::to_string(size_) +
                                         " when it was opened (the file shrank): its tensors cannot be viewed; open it again");
}

void MappedFile::read_ahead(uint64_t offset, uint64_t bytes) const {
  ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(bytes), POSIX_FADV_WILLNEED);
}

}  // namespace tmorph
