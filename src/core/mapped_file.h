// A read-only memory mapping of a whole file, with its descriptor kept open for explicit reads. Errors (missing, unreadable, a directory) throw
// tmorph::Error(Io) naming the path and the OS reason. An empty file maps to an empty span. A path with a
// registered FileOverlay (core/file_overlay.h: a remote file's bytes in memory) maps the overlay instead, and
// keeps it alive while open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tmorph {

class FileOverlay;

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // True when it maps a registered overlay (core/file_overlay.h) rather than the file.
  bool in_memory() const { return overlay_ != nullptr; }

  // Copies [offset, offset + bytes) with pread: a file that shrank since it was mapped is an error
  // naming the offset (where touching the mapping would raise SIGBUS).
  void read_at(uint64_t offset, void* out, uint64_t bytes) const;
  // Throws BadInput naming the path when the file is now shorter than when it was mapped (one fstat): touching
  // the mapping past its new end would raise SIGBUS. For callers that hand the mapping out (Python's zero-copy
  // arrays): a file cut after that check still faults, which docs/python.md says.
  void check_not_shrunk() const;
  // This process is done reading [offset, offset + bytes) for now: the whole pages inside are dropped from the
  // mapping (the page cache keeps them for whoever else reads the file; a neighbour still reading a shared page
  // refaults it; an overlay's memory file keeps them until its owner releases them).
  void drop_pages(uint64_t offset, uint64_t bytes) const;
  // Asks the kernel to start reading [offset, offset + bytes) into the page cache now (asynchronous).
  void read_ahead(uint64_t offset, uint64_t bytes) const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  int fd_ = -1;                           // -1 for an overlay
  std::shared_ptr<FileOverlay> overlay_;  // set when the path had one at opening
};

}  // namespace tmorph
