#include "server/connection_table.h"

#include <sys/socket.h>

namespace tmorph::server {

ConnectionTable::Admission ConnectionTable::admit(int fd, const std::string& peer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return Admission::Stopping;
  if (by_fd_.size() >= bounds_.total) return Admission::ServerFull;
  size_t& from_peer = per_peer_[peer];
  if (from_peer >= bounds_.per_peer) return Admission::PeerFull;
  ++from_peer;
  by_fd_[fd] = Entry{peer, false};
  return Admission::Admitted;
}

void ConnectionTable::release(int fd) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return;
  const auto p = per_peer_.find(it->second.peer);
  if (p != per_peer_.end() && --p->second == 0) per_peer_.erase(p);
  by_fd_.erase(it);
}

bool ConnectionTable::set_idle(int fd, bool idle) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = by_fd_.find(fd);
  if (it != by_fd_.end()) it->second.idle = idle;
  return !stopping_;
}

void ConnectionTable::stop() {
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = true;
  for (const auto& [fd, entry] : by_fd_)
    if (entry.idle) ::shutdown(fd, SHUT_RD);
}

}  // namespace tmorph::server
