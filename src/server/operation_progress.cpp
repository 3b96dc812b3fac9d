// Progress entries of long requests, named by the page (operation_progress.h).
#include "server/operation_progress.h"

#include "server/http_util.h"

namespace tmorph::server {

namespace {

constexpr size_t kKeptEntries = 256;

void check_id(const std::string& id) {
  bool ok = !id.empty() && id.size() <= 64;
  for (char c : id) ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-');
  if (!ok) throw HttpError(400, "parameter 'progress_id': 1 to 64 of A-Z a-z 0-9 _ -, got '" + id.substr(0, 80) + "'");
}

}  // namespace

OperationProgress::OperationProgress(std::string id) : id_(std::move(id)) {}

void OperationProgress::update(const std::string& stage, uint64_t done, uint64_t total) {
  std::lock_guard<std::mutex> lock(m_);
  stage_ = stage, done_ = done, total_ = total;
}

void OperationProgress::set_stage(const std::string& stage) {
  std::lock_guard<std::mutex> lock(m_);
  stage_ = stage, done_ = 0, total_ = 0;
}

void OperationProgress::finish(const std::string& outcome) {
  std::lock_guard<std::mutex> lock(m_);
  if (!outcome_.empty()) return;
  outcome_ = outcome;
  seconds_at_finish_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

bool OperationProgress::finished() const {
  std::lock_guard<std::mutex> lock(m_);
  return !outcome_.empty();
}

nlohmann::json OperationProgress::json() const {
  std::lock_guard<std::mutex> lock(m_);
  const double seconds = outcome_.empty() ? std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count() : seconds_at_finish_;
  return {{"id", id_}, {"seen", true}, {"stage", stage_}, {"done", done_}, {"total", total_}, {"seconds", seconds}, {"finished", !outcome_.empty()},
          {"outcome", outcome_.empty() ? nlohmann::json(nullptr) : nlohmann::json(outcome_)}, {"cancel_requested", cancel_.load()}};
}

void ProgressRegistry::keep(const std::string& id, std::shared_ptr<OperationProgress> p) {
  if (entries_.emplace(id, std::move(p)).second) order_.push_back(id);
  // Drop the oldest finished entries beyond the limit (running ones stay, whatever their number).
  for (auto it = order_.begin(); entries_.size() > kKeptEntries && it != order_.end();) {
    const auto e = entries_.find(*it);
    if (e != entries_.end() && e->second->finished()) {
      entries_.erase(e);
      it = order_.erase(it);
    } else {
      ++it;
    }
  }
}

std::shared_ptr<OperationProgress> ProgressRegistry::start(const std::string& id) {
  check_id(id);
  std::lock_guard<std::mutex> lock(m_);
  auto p = std::make_shared<OperationProgress>(id);
  if (const auto it = entries_.find(id); it != entries_.end()) {
    if (!it->second->finished()) throw HttpError(409, "progress_id '" + id + "' names a request that is still running");
    if (it->second->cancelled()) p->cancel();  // cancelled before this request started
    it->second = p;
    return p;
  }
  keep(id, p);
  return p;
}

std::shared_ptr<OperationProgress> ProgressRegistry::find(const std::string& id) const {
  std::lock_guard<std::mutex> lock(m_);
  const auto it = entries_.find(id);
  return it == entries_.end() ? nullptr : it->second;
}

std::shared_ptr<OperationProgress> ProgressRegistry::cancel(const std::string& id) {
  check_id(id);
  std::lock_guard<std::mutex> lock(m_);
  if (const auto it = entries_.find(id); it != entries_.end()) {
    it->second->cancel();
    return it->second;
  }
  auto p = std::make_shared<OperationProgress>(id);  // the request has not arrived: it is refused when it does
  p->cancel();
  p->set_stage("cancelled before it started");
  p->finish("cancelled");
  keep(id, p);
  return p;
}

}  // namespace tmorph::server
