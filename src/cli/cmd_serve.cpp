// tensormorph serve: parses the options into the server's launch request; the server face does the rest.
#include <memory>

#include "cli/commands.h"
#include "core/byte_size.h"
#include "server/launch.h"
#include "tensormorph/error.h"

#ifndef TM_VERSION
#define TM_VERSION "dev"
#endif

namespace tmorph::cli {

namespace {

struct ServeArgs {
  server::LaunchRequest request;
  std::string index_max_rate;
};

void run_serve(const ServeArgs& a) {
  server::LaunchRequest r = a.request;
  r.version = TM_VERSION;
  if (!a.index_max_rate.empty()) {
    r.index_max_bytes_per_s = parse_bytes(a.index_max_rate, "--index-max-rate");
    if (r.index_max_bytes_per_s == 0) throw Error(ErrorKind::InvalidArgument, "--index-max-rate: expected more than 0 bytes per second");
  }
  server::launch(r);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "serve the viewer and its JSON API (docs/api.md) for checkpoints, indexing "
                                              "them first");
  cmd->add_option("paths", a->request.paths, "checkpoints (files, shard directories, index JSONs or GGUF split shards) and 4D-STEM acquisitions (a master or data "
                  "file, or a folder with one master)")->required();
  cmd->add_option("--port", a->request.port, "TCP port (default 8765; 0: pick a free one, printed)");
  cmd->add_option("--host", a->request.host, "address to bind (default 127.0.0.1; any other needs a token)");
  cmd->add_option("--token", a->request.token, "require this token on every request (Bearer header, ?token= or cookie)");
  cmd->add_flag("--generate-token", a->request.generate_token, "require a random token (128 bits from /dev/urandom), printed in the URL");
  cmd->add_option("--web-root", a->request.web_root, "serve the web app from this directory (default: web/dist beside the binary "
                                             "or in the source tree)");
  cmd->add_option("--http-threads", a->request.http_threads,
                  "the most connections served at once, one worker thread each (default 128; 1 to 256); at most half "
                  "of them from one client address");
  cmd->add_option("--index-max-rate", a->index_max_rate,
                  "indexing jobs read at most this many bytes per second on average (e.g. 200M; default: as fast as "
                  "the disk allows), leaving the disk to other work");
  cmd->add_option("--resident-memory", a->request.resident_memory,
                  "bytes of 4D-STEM acquisitions kept resident between requests, decoded once (e.g. 8G; 0: off; default: "
                  "stem.resident_memory or a quarter of RAM)");
  cmd->add_option("--product-cache", a->request.product_cache,
                  "4D-STEM prepared products (stem prepare --cache DB) that acquisition pages draw without computing "
                  "(default: the user's cache, $XDG_CACHE_HOME/tensormorph/stem/products.sqlite)");
  cmd->callback([a] { run_serve(*a); });
}

}  // namespace tmorph::cli
