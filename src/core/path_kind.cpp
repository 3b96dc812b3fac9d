#include "core/path_kind.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISDIR(mode)) return "a folder";
  return "not a file";
}

}  // namespace

PathKind path_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return PathKind::Missing;
    if (errno == ELOOP) throw Error(ErrorKind::Io, path + ": symbolic links form a loop (or nest too deeply)");
    throw Error(ErrorKind::Io, path + ": cannot stat: " + std::strerror(errno));
  }
  if (S_ISREG(st.st_mode)) return PathKind::Regular;
  if (S_ISDIR(st.st_mode)) return PathKind::Directory;
  return PathKind::Other;
}

void require_regular_file(const std::string& path) {
  switch (path_kind(path)) {
    case PathKind::Regular: return;
    case PathKind::Missing: throw Error(ErrorKind::Io, path + ": no such file");
    default: {
      struct stat st {};
      ::stat(path.c_str(), &st);
      throw Error(ErrorKind::Io, path + ": not a regular file (" + kind_of(st.st_mode) + ")");
    }
  }
}

}  // namespace tmorph
