// Progress and cancellation of a long request that the page names: a product, an SSB preview or fit, a movie
// carries `progress_id=TOKEN` (the page's choice: 1 to 64 of A-Z a-z 0-9 _ -), and while it runs
// GET /api/progress/TOKEN says where it is (stage, work done of work planned, seconds) and DELETE /api/progress/TOKEN
// cancels it: the request then ends with 409 "cancelled". A DELETE that arrives before its request is kept, so the
// request is refused as cancelled when it starts (the page may cancel before the server has seen it). The last 256
// finished or cancelled entries are kept for GET; older ones are dropped.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace tmorph::server {

class OperationProgress {
 public:
  explicit OperationProgress(std::string id);

  // Work done of work planned (frames, loss evaluations) in the stage named; callable from any thread.
  void update(const std::string& stage, uint64_t done, uint64_t total);
  void set_stage(const std::string& stage);
  // "done", "failed" or "cancelled"; the first call wins.
  void finish(const std::string& outcome);

  const std::atomic<bool>& cancel_flag() const { return cancel_; }
  void cancel() { cancel_ = true; }
  bool cancelled() const { return cancel_; }
  bool finished() const;

  // {id, seen: true, stage, done, total, seconds, finished, outcome (null while running), cancel_requested}
  nlohmann::json json() const;

 private:
  const std::string id_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::atomic<bool> cancel_{false};
  mutable std::mutex m_;
  std::string stage_ = "queued", outcome_;
  uint64_t done_ = 0, total_ = 0;
  double seconds_at_finish_ = -1;
};

class ProgressRegistry {
 public:
  // The entry of a request that starts now under `id` (an entry cancelled before it is reused, still cancelled);
  // throws HttpError 400 for a malformed id and 409 when a request with this id is still running.
  std::shared_ptr<OperationProgress> start(const std::string& id);
  // The entry, or null.
  std::shared_ptr<OperationProgress> find(const std::string& id) const;
  // Cancels the running entry, or records a cancellation for a request not seen yet (throws 400 for a bad id).
  std::shared_ptr<OperationProgress> cancel(const std::string& id);

 private:
  void keep(const std::string& id, std::shared_ptr<OperationProgress> p);  // holds m_
  mutable std::mutex m_;
  std::unordered_map<std::string, std::shared_ptr<OperationProgress>> entries_;
  std::deque<std::string> order_;  // ids by first use, for dropping the oldest finished ones
};

// Ends an entry when the request's handler leaves: "done" when marked, "cancelled" when its flag was set, else
// "failed" (an exception).
class ProgressScope {
 public:
  explicit ProgressScope(std::shared_ptr<OperationProgress> p) : p_(std::move(p)) {}
  ~ProgressScope() {
    if (p_) p_->finish(done_ ? "done" : p_->cancelled() ? "cancelled" : "failed");
  }
  ProgressScope(const ProgressScope&) = delete;
  ProgressScope& operator=(const ProgressScope&) = delete;
  void done() { done_ = true; }
  OperationProgress* get() const { return p_.get(); }

 private:
  std::shared_ptr<OperationProgress> p_;
  bool done_ = false;
};

}  // namespace tmorph::server
