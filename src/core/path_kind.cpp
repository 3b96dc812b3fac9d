#include "core/path_kind.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

// stat() following links: false when nothing is there; throws for a loop or another failure.
bool stat_path(const std::string& path, struct stat& st) {
  if (::stat(path.c_str(), &st) == 0) return true;
  if (errno == ENOENT || errno == ENOTDIR) return false;
  if (errno == ELOOP) throw Error(ErrorKind::Io, path + ": symbolic links form a loop (or nest too deeply)");
  throw Error(ErrorKind::Io, path + ": cannot stat: " + std::strerror(errno));
}

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
  if (!stat_path(path, st)) return PathKind::Missing;
  if (S_ISREG(st.st_mode)) return PathKind::Regular;
  if (S_ISDIR(st.st_mode)) return PathKind::Directory;
  return PathKind::Other;
}

bool regular_file_or_missing(const std::string& path) {
  struct stat st {};
  if (!stat_path(path, st)) return false;
  if (!S_ISREG(st.st_mode)) throw Error(ErrorKind::Io, path + ": not a regular file (" + kind_of(st.st_mode) + ")");
  return true;
}

void require_regular_file(const std::string& path) {
  if (!regular_file_or_missing(path)) throw Error(ErrorKind::Io, path + ": no such file");
}

}  // namespace tmorph
