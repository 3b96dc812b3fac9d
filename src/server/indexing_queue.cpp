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
    // Lock order: the queue's mutex, then the checkpoint's. No job runs on this checkpoint (checked
    // here), so its mutex is held at most briefly by a request; the indexing thread takes the queue's
    // mutex only between jobs, never while it holds a checkpoint's.
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || running_ == checkpoint || std::find(queue_.begin(), queue_.end(), checkpoint) != queue_.end())
      return std::nullopt;
    id = state_.jobs.create("index", sc.id);
    sc.set_job(id);
    sc.phase = ServedCheckpoint::Phase::Indexing;
    {
      std::lock_guard<std::mutex> index_lock(sc.mutex);
      set_rows(state_, checkpoint);  // its tensors now say "being indexed (job N)"
    }
    queue_.push_back(checkpoint);
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
