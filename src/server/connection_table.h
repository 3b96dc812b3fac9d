// The connections `tensormorph serve` holds open: admission against a total bound and a bound per peer
// (client IP address), and which of them are idle (waiting for the first byte of their next request),
// so that a stopping server can close those at once instead of waiting out their keep-alive.
//
// Thread-safe; every method takes one mutex for a few map operations. A socket is in the table from
// admit() until release(); the caller must not close it before release(), so a socket number the table
// holds is always open (stop() never shuts down a reused descriptor).
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_map>

namespace tmorph::server {

struct ConnectionBounds {
  size_t total = 128;    // connections served at once, all peers together
  size_t per_peer = 64;  // connections served at once from one IP address
};

class ConnectionTable {
 public:
  enum class Admission { Admitted, ServerFull, PeerFull, Stopping };

  explicit ConnectionTable(ConnectionBounds bounds) : bounds_(bounds) {}

  const ConnectionBounds& bounds() const { return bounds_; }

  // Admits socket `fd` from `peer` when both bounds leave room (and the server is not stopping);
  // otherwise the table is unchanged and the answer says which bound refused it.
  Admission admit(int fd, const std::string& peer);
  // Forgets an admitted socket (call before closing it).
  void release(int fd);
  // Marks an admitted socket idle (waiting for its next request) or busy. Returns false when the
  // server is stopping: the caller then closes the connection instead of waiting.
  bool set_idle(int fd, bool idle);
  // From now on nothing is admitted and set_idle() answers false; idle sockets are shut down for
  // reading, which wakes the threads waiting on them.
  void stop();

 private:
  struct Entry {
    std::string peer;
    bool idle = false;
  };
  const ConnectionBounds bounds_;
  mutable std::mutex mutex_;
  std::unordered_map<int, Entry> by_fd_;
  std::unordered_map<std::string, size_t> per_peer_;
  bool stopping_ = false;
};

}  // namespace tmorph::server
