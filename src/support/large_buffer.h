// A large, uninitialised, page-aligned buffer from anonymous memory, asking the kernel for transparent
// huge pages (madvise) so that first touching gigabytes costs hundreds, not hundreds of thousands, of
// page faults. Allocation failure throws std::bad_alloc.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tmorph {

class LargeBuffer {
 public:
  LargeBuffer() = default;
  explicit LargeBuffer(size_t bytes);
  // populate: fault every page in now, in one call (MADV_POPULATE_WRITE, Linux 5.14+; ignored where unknown), for
  // memory that will be written soon in full: a page fault per page costs far more, most of all in a VM.
  enum class Populate { no, yes };
  LargeBuffer(size_t bytes, Populate populate);
  ~LargeBuffer();
  LargeBuffer(LargeBuffer&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr, o.size_ = 0; }
  LargeBuffer& operator=(LargeBuffer&& o) noexcept;
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;

  uint8_t* get() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tmorph
