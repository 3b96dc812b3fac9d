#include "server/stream_gate.h"

namespace tmorph::server {

bool StreamGate::try_open(unsigned limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_ >= limit) return false;
  ++open_;
  return true;
}

void StreamGate::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  --open_;
}

bool StreamGate::wait_stop(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return stopped_.wait_for(lock, timeout, [&] { return stopping_; });
}

void StreamGate::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = true;
  stopped_.notify_all();
}

bool StreamGate::stopping() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stopping_;
}

}  // namespace tmorph::server
