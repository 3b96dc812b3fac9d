#include "core/scratch_buffer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/format.h"
#include "tensormorph/error.h"

namespace tmorph {

ScratchBuffer::ScratchBuffer(uint64_t bytes, uint64_t heap_limit) : size_(bytes) {
  if (bytes <= heap_limit) {
    heap_.resize(bytes);
    data_ = heap_.data();
    return;
  }
  const char* tmp = std::getenv("TMPDIR");
  where_ = tmp && *tmp ? tmp : "/tmp";
  std::string path = where_ + "/tensormorph-scratch-XXXXXX";
  const int fd = ::mkstemp(path.data());
  if (fd < 0) throw Error(ErrorKind::Io, where_ + ": cannot create a scratch file: " + std::strerror(errno));
  ::unlink(path.c_str());
  const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc != 0) {
    ::close(fd);
    throw Error(ErrorKind::Io, where_ + ": cannot reserve " + format_bytes(static_cast<double>(bytes)) +
                                   " of scratch space: " + std::strerror(rc) + " (set TMPDIR to a larger volume)");
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw Error(ErrorKind::Io, where_ + ": cannot map the scratch file: " + std::strerror(e));
  data_ = static_cast<uint8_t*>(p);
  mapped_ = true;
}

ScratchBuffer::~ScratchBuffer() {
  if (mapped_) ::munmap(data_, size_);
}

}  // namespace tmorph
