#include "server/bounded_server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include <nlohmann/json.hpp>

#include "server/deadline_stream.h"

namespace tmorph::server {

namespace {

using Clock = DeadlineStream::Clock;

// The stream of the connection this thread serves (null between connections).
thread_local const DeadlineStream* t_stream = nullptr;

// A complete response with a JSON error body, written by this server itself (not through httplib's
// router): the refusals before a request is parsed, and the deadline. Always Connection: close.
void write_error(DeadlineStream& strm, int status, const char* reason, const std::string& message, bool retry_after) {
  const std::string body = nlohmann::json{{"error", message}}.dump();
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason + "\r\n" +
                    "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n" + (retry_after ? "Retry-After: 1\r\n" : "") +
                    "\r\n" + body;
  for (size_t done = 0; done < out.size();) {
    const ssize_t n = strm.write(out.data() + done, out.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Ends a connection the client may still be sending on: no more writes, read and drop what comes until
// the client closes or `linger` has passed, then close. (Closing with unread bytes would send a reset,
// which can make the client lose the response it has not read yet.)
void close_gently(socket_t sock, std::chrono::milliseconds linger) {
  ::shutdown(sock, SHUT_WR);
  const auto until = Clock::now() + linger;
  char drop[4096];
  for (auto now = Clock::now(); now < until; now = Clock::now()) {
    pollfd p{sock, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
    if (::poll(&p, 1, static_cast<int>(left) + 1) <= 0) break;
    if (::recv(sock, drop, sizeof drop, MSG_DONTWAIT) <= 0) break;
  }
  ::close(sock);
}

}  // namespace

BoundedServer::BoundedServer(const ConnectionLimits& limits) : limits_(limits), table_(limits.bounds) {
  const size_t threads = limits_.bounds.total + limits_.spare_threads;
  new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  // What httplib puts in its Keep-Alive response header; the loop below enforces the same values.
  set_keep_alive_max_count(limits_.keep_alive_max_requests);
  set_keep_alive_timeout(std::chrono::duration_cast<std::chrono::seconds>(limits_.keep_alive_idle).count());
}

bool BoundedServer::set_listen_backlog(int backlog) {
  const socket_t sock = svr_sock_;
  return sock != INVALID_SOCKET && ::listen(sock, backlog) == 0;
}

void BoundedServer::stop_serving() {
  stop();
  table_.stop();
}

bool BoundedServer::request_timed_out() { return t_stream && t_stream->expired(); }

std::string BoundedServer::timeout_message() const {
  const auto ms = limits_.request_deadline.count();
  return "the request did not arrive within " + (ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms");
}

bool BoundedServer::process_and_close_socket(socket_t sock) {
  std::string peer;
  int peer_port = 0;
  socket_address(sock, true, peer, peer_port);
  const int one = 1;
  ::setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // headers and body are separate writes

  const auto admission = table_.admit(sock, peer);
  if (admission != ConnectionTable::Admission::Admitted) {
    // The refusal must not hold this (spare) thread long: short write timeout and linger.
    DeadlineStream quick(sock, peer, peer_port, std::chrono::seconds(1));
    const auto& b = table_.bounds();
    const std::string why =
        admission == ConnectionTable::Admission::PeerFull
            ? "too many connections from " + peer + " (at most " + std::to_string(b.per_peer) + " at once); retry shortly"
        : admission == ConnectionTable::Admission::ServerFull
            ? "the server is serving its most connections (" + std::to_string(b.total) + "); retry shortly"
            : "the server is stopping";
    write_error(quick, 503, "Service Unavailable", why, admission != ConnectionTable::Admission::Stopping);
    close_gently(sock, std::chrono::milliseconds(500));
    return false;
  }

  DeadlineStream strm(sock, peer, peer_port, limits_.write_timeout);
  t_stream = &strm;
  bool ok = true;
  auto waiting_since = Clock::now();
  for (size_t left = limits_.keep_alive_max_requests; left > 0; --left) {
    if (!table_.set_idle(sock, true)) break;  // stopping
    const bool arriving = strm.wait_for_request(limits_.keep_alive_idle);
    const bool stopping = !table_.set_idle(sock, false) || svr_sock_ == INVALID_SOCKET;
    if (!arriving) break;
    strm.set_read_deadline(waiting_since + limits_.request_deadline);
    bool closed_by_client = false;
    ok = process_request(strm, left == 1 || stopping, closed_by_client, nullptr);
    if (strm.expired() && strm.written() == 0)  // cut off before a whole request line came
      write_error(strm, 408, "Request Timeout", timeout_message(), false);
    if (!ok || closed_by_client || stopping || strm.expired()) break;
    waiting_since = Clock::now();
  }
  t_stream = nullptr;
  table_.release(sock);
  close_gently(sock, std::chrono::milliseconds(100));
  return ok;
}

}  // namespace tmorph::server
