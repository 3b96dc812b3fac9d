#include "support/thread_pool.h"

#include <map>
#include <memory>

namespace tmorph {

namespace {
// Range `part` of `parts` over [0, n): contiguous, in index order, sizes differ by at most one.
void part_range(uint64_t n, unsigned parts, unsigned part, uint64_t* begin, uint64_t* end) {
  const uint64_t base = n / parts, extra = n % parts;
  *begin = part * base + (part < extra ? part : extra);
  *end = *begin + base + (part < extra ? 1 : 0);
}
}  // namespace

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0) threads = 1;
  for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::worker_loop(unsigned index) {
  uint64_t seen = 0;
  for (;;) {
    const RangeFn* job;
    uint64_t n;
    unsigned parts;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
      job = job_;
      n = job_n_;
      parts = job_parts_;
    }
    if (index < parts) {
      uint64_t b, e;
      part_range(n, parts, index, &b, &e);
      try {
        (*job)(b, e, index);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (--pending_ == 0) done_.notify_one();
  }
}

void ThreadPool::parallel_for(uint64_t n, const RangeFn& fn) {
  if (n == 0) return;
  const unsigned parts = static_cast<unsigned>(std::min<uint64_t>(size(), n));
  if (parts == 1) {
    fn(0, n, 0);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_parts_ = parts;
    pending_ = static_cast<unsigned>(workers_.size());
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  uint64_t b, e;
  part_range(n, parts, 0, &b, &e);
  std::exception_ptr mine;
  try {
    fn(b, e, 0);
  } catch (...) {
    mine = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  if (mine) std::rethrow_exception(mine);
  if (error_) std::rethrow_exception(error_);
}

ThreadPool& ThreadPool::shared(unsigned threads) {
  static std::mutex mutex;
  static std::map<unsigned, std::unique_ptr<ThreadPool>> pools;
  std::lock_guard<std::mutex> lock(mutex);
  auto& pool = pools[threads == 0 ? 1 : threads];
  if (!pool) pool = std::make_unique<ThreadPool>(threads);
  return *pool;
}

unsigned default_thread_count() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

}  // namespace tmorph
