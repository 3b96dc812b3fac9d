// Event streams of `tensormorph serve` other than the jobs' (today: acquisition readiness): bounded in number, so
// that open streams never take every worker thread, and woken for good when the server stops, so that an open
// stream never holds shutdown (serve() calls stop() beside JobRegistry::shutdown()).
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace tmorph::server {

// Every kind of event stream (jobs, acquisition readiness): at most this many open at once, each sending a
// comment line after this long without an event (so proxies and browsers keep it open).
inline constexpr unsigned kMaxEventStreams = 4;
inline constexpr std::chrono::milliseconds kEventHeartbeat{2000};

class StreamGate {
 public:
  // Opens one stream unless `limit` are open already (then false).
  bool try_open(unsigned limit);
  void close();
  // Waits up to `timeout`; returns at once, true, once stop() was called (false on timeout).
  bool wait_stop(std::chrono::milliseconds timeout) const;
  // Wakes every waiter; stopping() is true from then on.
  void stop();
  bool stopping() const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable stopped_;
  bool stopping_ = false;
  unsigned open_ = 0;
};

}  // namespace tmorph::server
