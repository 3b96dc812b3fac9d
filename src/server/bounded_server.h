// cpp-httplib's server with the connection handling `tensormorph serve` needs to hold load and slow
// clients (httplib 0.11 gives each connection a pool thread for its whole life and times out each read
// separately, so a few slow or idle clients could occupy every thread):
//   - admission: at most `bounds.total` connections at once and `bounds.per_peer` from one IP address;
//     a connection over either bound is answered 503 (JSON, Connection: close, Retry-After: 1) and closed;
//   - one pool thread per admitted connection (the pool has bounds.total + spare_threads threads, the
//     spares answering refusals), so idle or slow connections never make an admitted one wait for a thread;
//   - a deadline for each whole request: it must have fully arrived (request line, headers, body)
//     `request_deadline` after the server began waiting for it (the connection's admission, or the end of
//     the previous response); otherwise 408 and the connection is closed;
//   - keep-alive: the next request must begin within `keep_alive_idle`, at most `keep_alive_max_requests`
//     requests per connection; each write waits at most `write_timeout` for the client to take bytes.
// Routes, handlers and the other httplib settings are the base class's, unchanged.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include <httplib.h>

#include "server/connection_table.h"

namespace tmorph::server {

struct ConnectionLimits {
  ConnectionBounds bounds;
  std::chrono::milliseconds request_deadline{10'000};
  std::chrono::milliseconds keep_alive_idle{5'000};
  size_t keep_alive_max_requests = 100;
  std::chrono::milliseconds write_timeout{10'000};
  size_t spare_threads = 4;
};

class BoundedServer : public httplib::Server {
 public:
  explicit BoundedServer(const ConnectionLimits& limits);

  // Sets the listening socket's accept queue to `backlog` connections (call after binding): the
  // httplib library is compiled with a queue of 5, which drops connections of a burst of clients
  // (they retry after a second). Returns false when listen() fails.
  bool set_listen_backlog(int backlog);

  // Stops accepting (httplib's stop()) and closes idle connections at once; a connection in the middle
  // of a request finishes it, answered with Connection: close. listen_after_bind() then returns once
  // every connection has ended.
  void stop_serving();

  // On a thread serving a connection: true when its current request missed its deadline (httplib
  // then answers 400 for incomplete headers; the error handler makes that a 408 with timeout_message()).
  static bool request_timed_out();
  // "the request did not arrive within 10 s": the error of a 408.
  std::string timeout_message() const;

 private:
  bool process_and_close_socket(socket_t sock) override;

  ConnectionLimits limits_;
  ConnectionTable table_;
};

}  // namespace tmorph::server
