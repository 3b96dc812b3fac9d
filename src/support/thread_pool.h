// A fixed-size pool of worker threads for data-parallel loops.
// Contract: parallel_for splits [0, n) into `parts` contiguous ranges in index order and runs
// fn(begin, end, part) once per range; it returns when all ranges are done. Results must not
// depend on how the work was split; callers guarantee that by writing per-item or integer outputs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tmorph {

class ThreadPool {
 public:
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned size() const { return static_cast<unsigned>(workers_.size()) + 1; }

  using RangeFn = std::function<void(uint64_t begin, uint64_t end, unsigned part)>;
  // Runs fn over min(size(), n) ranges, one of them on the calling thread. Exceptions thrown by fn
  // are rethrown on the calling thread (the first one).
  void parallel_for(uint64_t n, const RangeFn& fn);

  // A process-wide pool with the given number of threads (created on first use per count).
  static ThreadPool& shared(unsigned threads);

 private:
  void worker_loop(unsigned index);

  std::vector<std::thread> workers_;
  std::mutex call_mutex_;  // one parallel_for at a time; concurrent callers queue here
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const RangeFn* job_ = nullptr;
  uint64_t job_n_ = 0;
  unsigned job_parts_ = 0;
  uint64_t generation_ = 0;
  unsigned pending_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

// Threads to use when the user did not say: the hardware concurrency (at least 1).
unsigned default_thread_count();

}  // namespace tmorph
