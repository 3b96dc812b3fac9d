#include "server/deadline_stream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace tmorph::server {

DeadlineStream::DeadlineStream(socket_t sock, std::string peer_ip, int peer_port, Clock::duration write_timeout)
    : sock_(sock), peer_ip_(std::move(peer_ip)), peer_port_(peer_port), write_timeout_(write_timeout) {}

void DeadlineStream::set_read_deadline(Clock::time_point t) {
  deadline_ = t;
  expired_ = false;
  written_ = 0;
}

bool DeadlineStream::wait(short events, Clock::time_point until) const {
  for (;;) {
    const auto now = Clock::now();
    if (now >= until) return false;
    // Whole milliseconds, rounded up so a wait never ends just before `until`; at most a minute per poll.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now).count();
    pollfd p{sock_, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 60'000)));
    if (n > 0) return true;  // ready, or POLLERR/POLLHUP: the next recv/send says which
    if (n < 0 && errno != EINTR) return true;
  }
}

bool DeadlineStream::wait_for_request(Clock::duration wait_time) {
  return begin_ < end_ || wait(POLLIN, Clock::now() + wait_time);
}

bool DeadlineStream::is_readable() const {
  if (begin_ < end_) return true;
  if (wait(POLLIN, deadline_)) return true;
  expired_ = true;
  return false;
}

ssize_t DeadlineStream::read(char* ptr, size_t size) {
  if (begin_ == end_) {
    for (;;) {
      if (!is_readable()) return -1;
      const ssize_t n = ::recv(sock_, buf_, sizeof buf_, MSG_DONTWAIT);
      if (n >= 0) {
        if (n == 0) return 0;  // the peer closed
        begin_ = 0, end_ = static_cast<size_t>(n);
        break;
      }
      if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    }
  }
  const size_t n = std::min(size, end_ - begin_);
  std::memcpy(ptr, buf_ + begin_, n);
  begin_ += n;
  return static_cast<ssize_t>(n);
}

bool DeadlineStream::is_writable() const {
  if (!wait(POLLOUT, Clock::now() + write_timeout_)) return false;
  pollfd p{sock_, POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP | POLLNVAL)) == 0;
}

ssize_t DeadlineStream::write(const char* ptr, size_t size) {
  const auto until = Clock::now() + write_timeout_;
  for (;;) {
    const ssize_t n = ::send(sock_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      written_ += static_cast<size_t>(n);
      return n;
    }
    if (errno == EINTR) continue;
    if ((errno != EAGAIN && errno != EWOULDBLOCK) || !wait(POLLOUT, until)) return -1;
  }
}

void DeadlineStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  ip = peer_ip_;
  port = peer_port_;
}

void DeadlineStream::get_local_ip_and_port(std::string& ip, int& port) const { socket_address(sock_, false, ip, port); }

bool socket_address(socket_t sock, bool peer, std::string& ip, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ip.clear();
  port = 0;
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if ((peer ? ::getpeername(sock, sa, &len) : ::getsockname(sock, sa, &len)) != 0) return false;
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
    port = ntohs(a->sin6_port);
  } else {
    return false;
  }
  ip = text;
  return true;
}

}  // namespace tmorph::server
