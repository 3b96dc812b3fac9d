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
