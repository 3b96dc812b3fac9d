// What the openers of plain-file formats (.npy, blockfile, ...) share: a case-insensitive extension test, the first
// bytes of a regular file read without blocking on a FIFO, and a recursive search of a folder for files of one format.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tmorph {

// Whether path's extension is `ext` (".npy"), ignoring case. Reads nothing.
bool has_extension(const std::string& path, const char* ext);

// The first bytes of a file and its size now.
struct FileHead {
  std::vector<uint8_t> bytes;  // min(size, max_bytes) bytes from offset 0
  uint64_t size = 0;           // the file's size in bytes when it was read
};

// Reads the first max_bytes bytes of `path` (fewer when the file is shorter). Throws Error(Io) naming the path
// unless it is a regular file (a FIFO is refused without waiting for a writer) or when reading fails.
FileHead read_file_head(const std::string& path, uint64_t max_bytes);

// Every regular file below `folder` (recursive, symbolic links to folders not followed, unreadable folders skipped)
// with extension `ext` for which accept(path) is true, as absolute normalised paths, sorted. accept must not throw.
std::vector<std::string> find_files(const std::string& folder, const char* ext, bool (*accept)(const std::string& path));

}  // namespace tmorph
