// tensormorph serve: the viewer's HTTP server (Debian's cpp-httplib) over checkpoints opened at start.
//
// Bounds: request bodies up to 1 MiB (413 beyond), a fixed pool of worker threads (one per open
// connection at a time), read and write timeouts of 10 s and a keep-alive wait of 5 s, so a client
// that connects and sends nothing holds one worker for at most that long and never blocks the others
// while workers are free. Tiles and images are bounded by the pyramid's levels and the renderer's
// pixel limit.
#pragma once

#include <functional>
#include <string>

#include "server/server_state.h"

namespace tmorph::server {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8765;        // 0: a free port, printed
  std::string token;      // empty: none (then host must be loopback)
  unsigned threads = 0;   // worker threads; 0: max(8, 2 x cores), at most 64
  std::function<void()> on_listening;  // called once bound, before the URL is printed (starts the jobs)
};

// Binds, prints "tensormorph: serving on URL" (the URL carries ?token= when there is one) on stdout,
// and serves until SIGINT or SIGTERM, then stops accepting, finishes the requests in flight and
// returns. Throws Error(InvalidArgument) for a non-loopback host without a token, Error(Io) when the
// address cannot be bound.
void serve(ServerState& state, const ServeOptions& options);

}  // namespace tmorph::server
