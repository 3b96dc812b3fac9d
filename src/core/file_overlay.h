// A file's bytes held in a private memory file of this process instead of on disk: while an overlay of a path is
// registered, every MappedFile of that path (the openers, the index, the faces) maps the overlay rather than the
// file. A remote file's stand-in (remote/mirror_file.h) uses one: received bytes are written here once (pwrite into
// a sparse memfd: no disk, no zeroing of fresh pages), read in place by the statistics, and released again (holes
// punched); the file on disk keeps only the headers. Bytes never written cost nothing and read as zeros, like the
// stand-in's holes. Being the process's own, an overlay's bytes cannot be released by another process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tmorph {

class FileOverlay {
 public:
  // `size` zero bytes standing for the file at `path` (not registered yet). Io naming the path when the address
  // space cannot be reserved.
  FileOverlay(std::string path, uint64_t size);
  ~FileOverlay();
  FileOverlay(const FileOverlay&) = delete;
  FileOverlay& operator=(const FileOverlay&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  const uint8_t* data() const { return data_; }

  // Writes `bytes` bytes at `offset` (pwrite: the mapping sees them); Internal naming the path when the range lies
  // outside, Io when memory runs out. Thread-safe.
  void write(uint64_t offset, const uint8_t* from, size_t bytes);
  // Copies [offset, offset + bytes) out (pread: no page of the mapping is faulted in); false when the range lies
  // outside.
  bool read(uint64_t offset, void* out, uint64_t bytes) const;
  // Frees the whole pages inside [offset, offset + bytes): they read as zeros again and hold no memory. Bytes of a
  // page the range shares with its neighbours stay.
  void release(uint64_t offset, uint64_t bytes);
  // Bytes of memory the overlay holds now, for reports and tests.
  uint64_t resident_bytes() const;

 private:
  std::string path_;
  uint64_t size_ = 0;
  int fd_ = -1;  // the memory file
  const uint8_t* data_ = nullptr;
};

// The key a path is registered under: absolute, lexically normal (no file-system access beyond the working folder).
std::string overlay_key(const std::string& path);
// Makes MappedFile(overlay->path()) map `overlay` from now on, for as long as anything holds it (its owners and
// the MappedFiles open on it): the registry keeps no reference. Replaces an earlier registration of the path.
void register_overlay(const std::shared_ptr<FileOverlay>& overlay);
// The overlay registered for `path` and still held, or null.
std::shared_ptr<FileOverlay> find_overlay(const std::string& path);

}  // namespace tmorph
