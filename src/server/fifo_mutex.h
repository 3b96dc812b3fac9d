// A mutex that is handed to its waiters in the order they arrived. std::mutex promises no order: under
// contention the thread that just unlocked it often takes it again, and an unlucky waiter can wait many
// turns (with 32 clients asking for cells, some waited 3x the median). Here the worst wait is the sum of
// the turns queued ahead. Meets Lockable (std::lock_guard, std::unique_lock); not recursive.
#pragma once

#include <condition_variable>
#include <deque>
#include <mutex>

namespace tmorph::server {

class FifoMutex {
 public:
  void lock();
  bool try_lock();
  void unlock();

 private:
  struct Waiter {
    std::condition_variable cv;
    bool granted = false;
  };
  std::mutex m_;
  bool held_ = false;            // stays true while the mutex passes from one owner to the next waiter
  std::deque<Waiter*> waiters_;  // in arrival order; each lives on its waiting thread's stack
};

}  // namespace tmorph::server
