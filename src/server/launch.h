// Starting the server face: what `tensormorph serve` (or any other launcher) asks for, checked, then the
// checkpoints opened, their indexing queued as jobs, and the server run until SIGINT or SIGTERM.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tmorph::server {

struct LaunchRequest {
  std::vector<std::string> paths;  // checkpoints: files, shard directories, index JSONs or GGUF split shards
  std::string host = "127.0.0.1";
  int port = 8765;                 // 0..65535; 0: a free port, printed
  std::string token;               // 8 to 256 of [A-Za-z0-9._~-]; empty: none (then host must be loopback)
  bool generate_token = false;     // a random token instead (exclusive with token)
  std::string web_root;            // empty: web/dist beside the binary, one folder up, or in the source tree
  std::optional<long long> http_threads;  // connections served at once (--http-threads): 1 to 256; none: 128
  uint64_t index_max_bytes_per_s = 0;  // 0: indexing jobs read as fast as the disk allows
  std::string product_cache;       // --product-cache: the prepared-products cache the pages read (empty: the user's default)
  std::string resident_memory;     // --resident-memory: bytes of acquisitions kept resident (empty: stem.resident_memory or a quarter of RAM)
  std::string version;             // reported by GET /api/health
};

// Validates the request (Error(InvalidArgument) naming the option, before any file is opened), opens every
// checkpoint (a damaged or missing file fails here, before serving), queues one indexing job per checkpoint
// (started once the server listens) and serves until stopped. Progress lines go to stderr.
void launch(const LaunchRequest& request);

}  // namespace tmorph::server
