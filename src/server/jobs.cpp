#include "server/jobs.h"

namespace tmorph::server {

nlohmann::json job_json(const Job& j) {
  nlohmann::json out = {{"id", j.id},
                        {"kind", j.kind},
                        {"checkpoint", j.checkpoint},
                        {"state", j.state},
                        {"version", j.version},
                        {"bytes_done", j.bytes_done},
                        {"bytes_total", j.bytes_total},
                        {"tensors_done", j.tensors_done},
                        {"tensors_total", j.tensors_total},
                        {"seconds", j.seconds},
                        {"bytes_per_s", j.seconds > 0 ? static_cast<double>(j.bytes_done) / j.seconds : 0.0},
                        {"error", j.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(j.error)},
                        {"report", j.report}};
  return out;
}

std::string JobRegistry::create(const std::string& kind, const std::string& checkpoint) {
  std::lock_guard<std::mutex> lock(mutex_);
  Job j;
  j.id = std::to_string(jobs_.size());
  j.kind = kind;
  j.checkpoint = checkpoint;
  j.report = nullptr;
  jobs_.push_back(j);
  changed_.notify_all();
  return j.id;
}

Job* JobRegistry::locked_find(const std::string& id) {
  for (auto& j : jobs_)
    if (j.id == id) return &j;
  return nullptr;
}

void JobRegistry::progress(const std::string& id, uint64_t bytes_done, uint64_t bytes_total, uint64_t tensors_done,
                           uint64_t tensors_total, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  Job* j = locked_find(id);
  if (!j || j->finished()) return;
  j->bytes_done = bytes_done, j->bytes_total = bytes_total;
  j->tensors_done = tensors_done, j->tensors_total = tensors_total;
  j->seconds = seconds;
  ++j->version;
  changed_.notify_all();
}

void JobRegistry::finish(const std::string& id, const std::string& state, const std::string& error, nlohmann::json report) {
  std::lock_guard<std::mutex> lock(mutex_);
  Job* j = locked_find(id);
  if (!j || j->finished()) return;
  j->state = state;
  j->error = error;
  j->report = std::move(report);
  ++j->version;
  changed_.notify_all();
}

std::vector<Job> JobRegistry::list() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return jobs_;
}

std::optional<Job> JobRegistry::find(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& j : jobs_)
    if (j.id == id) return j;
  return std::nullopt;
}

std::optional<Job> JobRegistry::wait(const std::string& id, uint64_t after, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto current = [&]() -> const Job* {
    for (const auto& j : jobs_)
      if (j.id == id) return &j;
    return nullptr;
  };
  if (!current()) return std::nullopt;
  changed_.wait_for(lock, timeout, [&] {
    const Job* j = current();
    return stopping_ || j->version > after || j->finished();
  });
  return *current();
}

void JobRegistry::shutdown() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = true;
  changed_.notify_all();
}

bool JobRegistry::stopping() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stopping_;
}

bool JobRegistry::try_open_stream(unsigned limit) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (streams_ >= limit) return false;
  ++streams_;
  return true;
}

void JobRegistry::close_stream() {
  std::lock_guard<std::mutex> lock(mutex_);
  --streams_;
}

}  // namespace tmorph::server
