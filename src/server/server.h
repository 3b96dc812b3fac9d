// tensormorph serve: the viewer's HTTP server (Debian's cpp-httplib) over checkpoints opened at start.
//
// Bounds: request bodies up to 1 MiB (413 beyond); at most `threads` connections at once, half of them
// (rounded up) from one IP address, 503 beyond, each with its own worker thread; a whole request must
// arrive within 10 s (408), the next one on a keep-alive connection begin within 5 s, at most 100 per
// connection; each write waits at most 10 s (bounded_server.h). Tiles and images are bounded by the
// pyramid's levels and the renderer's pixel limit.
#pragma once

#include <functional>
#include <string>

#include "server/server_state.h"

namespace tmorph::server {

// --http-threads: the default and the most, connections served at once (one worker thread each).
inline constexpr unsigned kDefaultHttpThreads = 128, kMaxHttpThreads = 256;

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8765;        // 0: a free port, printed
  std::string token;      // empty: none (then host must be loopback)
  long long threads = kDefaultHttpThreads;  // connections served at once, 1..kMaxHttpThreads
  std::function<void()> on_listening;  // called once bound, before the URL is printed (starts the jobs)
};

// Throws Error(InvalidArgument) naming the flag for a non-loopback host without a token, a port outside
// 0..65535 or threads outside 1..kMaxHttpThreads. serve() checks; faces call it first to refuse a
// mistake before any work.
void check_serve_options(const ServeOptions& options);

// Binds, prints "tensormorph: serving on URL" (the URL carries ?token= when there is one) on stdout,
// and serves until SIGINT or SIGTERM, then stops accepting, finishes the requests in flight and
// returns. Throws what check_serve_options throws, and Error(Io) when the address cannot be bound.
void serve(ServerState& state, const ServeOptions& options);

}  // namespace tmorph::server
