// The thread that runs `tensormorph serve`'s indexing jobs, one checkpoint at a time (each job uses every
// core). enqueue() creates the job and marks the checkpoint as indexing; the thread runs queued jobs
// once start() is called (when the server listens). The destructor cancels: the running job stops
// between tensors (what it committed stays in the index), queued ones are finished as cancelled.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace tmorph::server {

struct ServerState;

class IndexingQueue {
 public:
  explicit IndexingQueue(ServerState& state) : state_(state) {}
  ~IndexingQueue();
  IndexingQueue(const IndexingQueue&) = delete;
  IndexingQueue& operator=(const IndexingQueue&) = delete;

  void start();
  // Queues the indexing of checkpoints[checkpoint] and returns its new job's id; nullopt when that
  // checkpoint is already queued or being indexed.
  std::optional<std::string> enqueue(size_t checkpoint);

 private:
  void run();
  ServerState& state_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<size_t> queue_;
  std::optional<size_t> running_;
  bool stopping_ = false;
  std::atomic<bool> cancel_{false};
  std::thread thread_;
};

}  // namespace tmorph::server
