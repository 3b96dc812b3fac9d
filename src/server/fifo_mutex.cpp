#include "server/fifo_mutex.h"

namespace tmorph::server {

void FifoMutex::lock() {
  std::unique_lock<std::mutex> l(m_);
  if (!held_) {  // held_ is false only when nobody waits
    held_ = true;
    return;
  }
  Waiter w;
  waiters_.push_back(&w);
  w.cv.wait(l, [&w] { return w.granted; });
}

bool FifoMutex::try_lock() {
  std::lock_guard<std::mutex> l(m_);
  if (held_) return false;
  held_ = true;
  return true;
}

void FifoMutex::unlock() {
  std::lock_guard<std::mutex> l(m_);
  if (waiters_.empty()) {
    held_ = false;
    return;
  }
  Waiter* next = waiters_.front();
  waiters_.pop_front();
  next->granted = true;
  // Under m_: the waiter cannot return (and destroy `next`) before this call, since it needs m_ to wake.
  next->cv.notify_one();
}

}  // namespace tmorph::server
