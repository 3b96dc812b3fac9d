// What identifies one file of an indexed checkpoint: its size, its modification time and a hash of
// its header bytes (the part that says which tensors live where). Checking it reads only the header,
// so reopening an indexed multi-terabyte checkpoint costs a stat and a few kilobytes per file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tmorph {

struct FileIdentity {
  std::string path;          // absolute
  uint64_t size = 0;         // bytes
  int64_t mtime_ns = 0;      // nanoseconds since the epoch
  uint64_t header_bytes = 0; // hashed prefix length
  std::string header_hash;   // XXH3-64 of the first header_bytes bytes, 16 hex digits

  bool operator==(const FileIdentity&) const = default;
};

// The identity of the file at path now, hashing its first header_bytes bytes. Returns nullopt when
// the file is missing or shorter than header_bytes (it has changed); throws Error(Io) when it exists
// but cannot be read.
std::optional<FileIdentity> file_identity(const std::string& path, uint64_t header_bytes);

}  // namespace tmorph
