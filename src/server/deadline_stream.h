// The byte stream of one accepted connection as cpp-httplib's request parser and response writer see it,
// with a deadline for the whole request instead of a timeout per read: every byte of a request (request
// line, headers, body) must arrive before the deadline the connection loop sets, however the client
// splits it, so a client sending one byte every few seconds is cut off at the deadline rather than kept
// alive by each byte. Each write waits at most `write_timeout` for the socket to accept more bytes.
//
// Reads are buffered (httplib's line reader asks for one byte at a time); bytes of a pipelined next
// request stay in the buffer for the next request. One stream per connection, used by one thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>

#include <httplib.h>

namespace tmorph::server {

class DeadlineStream final : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;

  DeadlineStream(socket_t sock, std::string peer_ip, int peer_port, Clock::duration write_timeout);

  // Reads after `t` fail (return -1) and mark the stream expired. Clears expired().
  void set_read_deadline(Clock::time_point t);
  // true once a read failed because the deadline had passed.
  bool expired() const { return expired_; }
  // true when a next request has begun to arrive (bytes buffered or readable, or the peer closed:
  // the parser then sees the end) within `wait`; false when nothing came.
  bool wait_for_request(Clock::duration wait);
  // Bytes written since the last set_read_deadline() (0: no response was started).
  size_t written() const { return written_; }

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return sock_; }

 private:
  // poll() for `events` until `until`; true when ready (or an error/hang-up the next call reports).
  bool wait(short events, Clock::time_point until) const;

  socket_t sock_;
  std::string peer_ip_;
  int peer_port_;
  Clock::duration write_timeout_;
  Clock::time_point deadline_ = Clock::time_point::max();
  mutable bool expired_ = false;
  size_t written_ = 0;
  char buf_[4096];
  size_t begin_ = 0, end_ = 0;  // unread bytes are buf_[begin_, end_)
};

// The numeric address and port of a socket's peer (`peer`) or of its own end; false (ip empty, port 0)
// when the socket has none.
bool socket_address(socket_t sock, bool peer, std::string& ip, int& port);

}  // namespace tmorph::server
