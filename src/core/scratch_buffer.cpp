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

namespace {

thread_local std::unique_ptr<uint8_t[]> tls_cache;
thread_local uint64_t tls_cache_size = 0;
thread_local bool tls_cache_in_use = false;

}  // namespace

ScratchBuffer::ScratchBuffer(uint64_t bytes, uint64_t heap_limit) : size_(bytes) {
  if (bytes <= heap_limit) {
    // Each thread keeps its largest heap buffer for the next ScratchBuffer: faulting in fresh pages
    // costs more than the work they hold (a quantized tensor's statistics), and an indexing worker
    // needs one such buffer per tensor. Not value-initialised: the caller overwrites every byte.
    if (!tls_cache_in_use && tls_cache_size >= bytes) {
      tls_cache_in_use = true;
      borrowed_ = true;
      data_ = tls_cache.get();
      return;
    }
    if (!tls_cache_in_use) {
      tls_cache = std::make_unique_for_overwrite<uint8_t[]>(bytes ? bytes : 1);
      tls_cache_size = bytes;
      tls_cache_in_use = true;
      borrowed_ = true;
      data_ = tls_cache.get();
      return;
    }
    heap_ = std::make_unique_for_overwrite<uint8_t[]>(bytes ? bytes : 1);  // nested: a buffer of its own
    data_ = heap_.get();
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
  if (borrowed_) tls_cache_in_use = false;
}

}  // namespace tmorph
