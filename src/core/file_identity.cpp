#include "core/file_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "tensormorph/error.h"

namespace tmorph {

std::optional<FileIdentity> file_identity(const std::string& path, uint64_t header_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer (forever); it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
    throw Error(ErrorKind::Io, path + ": cannot open: " + std::strerror(errno));
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(ErrorKind::Io, path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::Io, path + ": not a regular file");
  FileIdentity id;
  id.path = path;
  id.size = static_cast<uint64_t>(st.st_size);
  id.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  id.header_bytes = header_bytes;
  if (header_bytes > id.size) return std::nullopt;
  XXH3_state_t* state = XXH3_createState();
  if (!state) throw std::bad_alloc();
  struct StateFree {
    XXH3_state_t* s;
    ~StateFree() { XXH3_freeState(s); }
  } state_free{state};
  XXH3_64bits_reset(state);
  std::vector<uint8_t> buf(std::min<uint64_t>(header_bytes, 1 << 20));
  for (uint64_t done = 0; done < header_bytes;) {
    const ssize_t n = ::pread(fd, buf.data(), std::min<uint64_t>(buf.size(), header_bytes - done), static_cast<off_t>(done));
    if (n < 0) throw Error(ErrorKind::Io, path + ": read failed at offset " + std::to_string(done) + ": " + std::strerror(errno));
    if (n == 0) return std::nullopt;  // shrank while reading
    XXH3_64bits_update(state, buf.data(), static_cast<size_t>(n));
    done += static_cast<uint64_t>(n);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits_digest(state)));
  id.header_hash = hex;
  return id;
}

}  // namespace tmorph
