// Working memory for a result that may not fit in RAM: on the heap when it is at most `heap_limit`
// bytes (each thread reuses its largest such buffer, which stays allocated until the thread ends),
// otherwise in an unlinked temporary file (in $TMPDIR, else /tmp) mapped into memory, whose
// space is reserved up front so a full disk is a clear error rather than SIGBUS. The file disappears
// with the buffer (or the process).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tmorph {

class ScratchBuffer {
 public:
  ScratchBuffer(uint64_t bytes, uint64_t heap_limit);
  ~ScratchBuffer();
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;

  uint8_t* data() { return data_; }
  uint64_t size() const { return size_; }
  bool file_backed() const { return mapped_; }
  const std::string& where() const { return where_; }  // "heap" or the temporary directory

 private:
  std::unique_ptr<uint8_t[]> heap_;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  bool mapped_ = false;
  bool borrowed_ = false;  // the thread's cached heap buffer (kept for the next ScratchBuffer)
  std::string where_ = "heap";
};

}  // namespace tmorph
