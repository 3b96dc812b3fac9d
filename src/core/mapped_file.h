// A read-only memory mapping of a whole file. Errors (missing, unreadable, a directory) throw
// tmorph::Error(Io) naming the path and the OS reason. An empty file maps to an empty span.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tmorph {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace tmorph
