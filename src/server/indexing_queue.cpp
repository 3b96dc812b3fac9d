#include "server/indexing_queue.h"

#include <algorithm>

#include "server/server_state.h"

namespace tmorph::server {

IndexingQueue::~IndexingQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    cancel_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (size_t k : queue_) state_.jobs.finish(state_.checkpoints[k]->job(), "cancelled", "", nullptr);
}

void IndexingQueue::start() {
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
}

std::optional<std::string> IndexingQueue::enqueue(size_t checkpoint) {
  ServedCheckpoint& sc = *state_.checkpoints[checkpoint];
  std::string id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || running_ == checkpoint || std::find(queue_.begin(), queue_.end(), checkpoint) != queue_.end())
      return std::nullopt;
    id = state_.jobs.create("index", sc.id);
    sc.set_job(id);
    sc.phase = ServedCheckpoint::Phase::Indexing;
    queue_.push_back(checkpoint);
  }
  {
    // No job runs on it (checked above), so this only waits for requests using its index.
    std::lock_guard<std::mutex> lock(sc.mutex);
    set_rows(state_, checkpoint);
  }
  wake_.notify_all();
  return id;
}

void IndexingQueue::run() {
  for (;;) {
    size_t k;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      k = queue_.front();
      queue_.pop_front();
      running_ = k;
    }
    run_indexing_job(state_, k, cancel_);
    std::lock_guard<std::mutex> lock(mutex_);
    running_.reset();
  }
}

}  // namespace tmorph::server
