// What the openers of plain-file formats (.npy, blockfile, ...) share: a case-insensitive extension test, the first
// bytes of a regular file read without blocking on a FIFO, a recursive search of a folder for files of one format, and
// big-endian pixels in the host's order.
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
// with extension `ext` for which accept(path) is true (every one when accept is null), as absolute normalised paths,
// sorted. accept must not throw.
std::vector<std::string> find_files(const std::string& folder, const char* ext, bool (*accept)(const std::string& path) = nullptr);

// Copies `pixels` big-endian unsigned values of element_size bytes (1, 2 or 4) from `stored` to `frame` in the host's
// (little-endian) order: the unpack step of formats that store pixels big-endian (MIB processed frames, '>u2'/'>u4'
// .npy arrays, big-endian blockfiles).
void big_endian_to_host(const uint8_t* stored, uint8_t* frame, uint64_t pixels, uint32_t element_size);

}  // namespace tmorph
