#include "support/large_buffer.h"

#include <sys/mman.h>

#include <new>

namespace tmorph {

LargeBuffer::LargeBuffer(size_t bytes) : LargeBuffer(bytes, Populate::no) {}

LargeBuffer::LargeBuffer(size_t bytes, Populate populate) : size_(bytes) {
  if (bytes == 0) return;
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  ::madvise(p, bytes, MADV_HUGEPAGE);  // advisory: ignored where transparent huge pages are off
#ifdef MADV_POPULATE_WRITE
  if (populate == Populate::yes) ::madvise(p, bytes, MADV_POPULATE_WRITE);  // advisory too: pages fault in later if refused
#endif
  data_ = static_cast<uint8_t*>(p);
}

LargeBuffer::~LargeBuffer() {
  if (data_) ::munmap(data_, size_);
}

LargeBuffer& LargeBuffer::operator=(LargeBuffer&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(data_, size_);
    data_ = o.data_, size_ = o.size_;
    o.data_ = nullptr, o.size_ = 0;
  }
  return *this;
}

}  // namespace tmorph
