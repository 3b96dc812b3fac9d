// Long-running jobs of `tensormorph serve` (today: indexing a checkpoint), observable while they run.
//
// A job's state only moves forward: running -> done | failed | cancelled. Every change bumps the job's
// version; readers take consistent snapshots (Job) and can wait for the next version, which is what the
// event stream (GET /api/jobs/{id}/events) does. shutdown() wakes every waiter for good, so a server can
// stop while clients are still streaming.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tmorph::server {

struct Job {
  std::string id;          // "0", "1", ... in creation order
  std::string kind;        // "index"
  std::string checkpoint;  // the checkpoint's id
  std::string state = "running";  // running, done, failed, cancelled
  uint64_t version = 0;    // bumped by every change
  uint64_t bytes_done = 0, bytes_total = 0;  // tensor bytes this run reads
  uint64_t tensors_done = 0, tensors_total = 0;
  double seconds = 0;      // since the job started
  std::string error;       // when failed
  nlohmann::json report;   // when done: what the job reports (kind-specific)
  bool finished() const { return state != "running"; }
};

nlohmann::json job_json(const Job& job);

class JobRegistry {
 public:
  // Creates a running job; returns its id.
  std::string create(const std::string& kind, const std::string& checkpoint);
  // Progress of a running job (ignored once it has finished).
  void progress(const std::string& id, uint64_t bytes_done, uint64_t bytes_total, uint64_t tensors_done,
                uint64_t tensors_total, double seconds);
  // Ends a running job: state is "done", "failed" (with error) or "cancelled".
  void finish(const std::string& id, const std::string& state, const std::string& error, nlohmann::json report);

  std::vector<Job> list() const;
  std::optional<Job> find(const std::string& id) const;
  // The job once its version exceeds `after`, it has finished, shutdown() was called, or `timeout`
  // passed (then the unchanged snapshot). nullopt for an unknown id.
  std::optional<Job> wait(const std::string& id, uint64_t after, std::chrono::milliseconds timeout) const;

  // Wakes every waiter; stopping() is true from then on.
  void shutdown();
  bool stopping() const;

  // Event streams open now, bounded so that streams cannot take every worker thread.
  bool try_open_stream(unsigned limit);
  void close_stream();

 private:
  Job* locked_find(const std::string& id);
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::vector<Job> jobs_;
  bool stopping_ = false;
  unsigned streams_ = 0;
};

}  // namespace tmorph::server
