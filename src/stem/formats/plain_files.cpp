#include "stem/formats/plain_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/folder_walk.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace fs = std::filesystem;

bool has_extension(const std::string& path, const char* ext) {
  std::string e = fs::path(path).extension().string();
  for (char& c : e) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return e == ext;
}

FileHead read_file_head(const std::string& path, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer; a regular file ignores the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorKind::Io, path + ": cannot open: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw Error(ErrorKind::Io, path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::Io, path + ": not a regular file");
  FileHead head;
  head.size = static_cast<uint64_t>(st.st_size);
  head.bytes.resize(std::min(head.size, max_bytes));
  uint64_t got = 0;
  while (got < head.bytes.size()) {
    const ssize_t n = ::pread(fd, head.bytes.data() + got, head.bytes.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error(ErrorKind::Io, path + ": cannot read: " + std::strerror(errno));
    if (n == 0) break;  // shrank since fstat
    got += static_cast<uint64_t>(n);
  }
  head.bytes.resize(got);
  return head;
}

std::vector<std::string> find_files(const std::string& folder, const char* ext, bool (*accept)(const std::string& path)) {
  return find_regular_files(folder, [ext, accept](const std::string& path) { return has_extension(path, ext) && (!accept || accept(path)); });
}

void big_endian_to_host(const uint8_t* stored, uint8_t* frame, uint64_t pixels, uint32_t element_size) {
  if (element_size == 1) {
    std::memcpy(frame, stored, pixels);
  } else if (element_size == 2) {
    for (uint64_t i = 0; i < pixels; ++i) {
      uint16_t v;
      std::memcpy(&v, stored + 2 * i, 2);
      v = __builtin_bswap16(v);
      std::memcpy(frame + 2 * i, &v, 2);
    }
  } else {
    for (uint64_t i = 0; i < pixels; ++i) {
      uint32_t v;
      std::memcpy(&v, stored + 4 * i, 4);
      v = __builtin_bswap32(v);
      std::memcpy(frame + 4 * i, &v, 4);
    }
  }
}

}  // namespace tmorph
