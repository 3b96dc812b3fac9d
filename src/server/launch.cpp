#include "server/launch.h"

#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>

#include <nlohmann/json.hpp>

#include "app/indexing.h"
#include "app/backends_json.h"
#include "app/runtime.h"
#include "stem/acquisition.h"
#include "server/auth.h"
#include "server/indexing_queue.h"
#include "server/server.h"
#include "tensormorph/error.h"

#ifndef TM_SOURCE_DIR
#define TM_SOURCE_DIR ""
#endif

namespace tmorph::server {

namespace {

namespace fs = std::filesystem;

// The built web app: `given`, else web/dist beside the binary, one folder up, or in the source tree.
// Returns the canonical directory, or empty for the built-in page.
std::string find_web_root(const std::string& given) {
  std::error_code ec;
  if (!given.empty()) {
    const fs::path p = fs::canonical(given, ec);
    if (ec || !fs::is_directory(p, ec)) throw Error(ErrorKind::InvalidArgument, "--web-root " + given + ": not a directory");
    if (p == p.root_path()) throw Error(ErrorKind::InvalidArgument, "--web-root " + given + ": refusing to serve the root directory");
    return p.string();
  }
  const std::string exe = app::executable_dir();
  for (const auto& dir : {exe + "/web/dist", exe + "/../web/dist", std::string(TM_SOURCE_DIR) + "/web/dist"}) {
    if (dir == "/web/dist") continue;  // no source dir compiled in
    const fs::path p = fs::canonical(dir, ec);
    if (!ec && fs::is_regular_file(p / "index.html", ec)) return p.string();
  }
  return {};
}

ServeOptions checked_options(const LaunchRequest& r) {
  ServeOptions opt;
  opt.host = r.host, opt.port = r.port;
  if (r.generate_token && !r.token.empty()) throw Error(ErrorKind::InvalidArgument, "give --token or --generate-token, not both");
  static const std::regex token_re("[A-Za-z0-9._~-]{8,256}");
  if (!r.token.empty() && !std::regex_match(r.token, token_re))
    throw Error(ErrorKind::InvalidArgument, "--token: 8 to 256 characters among letters, digits and . _ ~ -");
  opt.token = r.generate_token ? generate_token() : r.token;
  if (r.http_threads) opt.threads = *r.http_threads;
  check_serve_options(opt);  // refused before any indexing, so a mistake costs nothing
  return opt;
}

}  // namespace

void launch(const LaunchRequest& request) {
  ServeOptions opt = checked_options(request);
  const std::string web_root = find_web_root(request.web_root);

  // The runtime (rebuilt when settings change) also sets the resident store's budget: --resident-memory, else
  // stem.resident_memory, else a quarter of RAM.
  ServerState state([resident = request.resident_memory] {
    app::ComputeRequest flags;
    flags.resident_memory = resident;
    auto rt = app::make_runtime(&flags);
    app::apply_resident_memory(*rt, app::quarter_of_ram());
    return rt;
  });
  state.version = request.version;
  state.known_backends = app::parity_matrix().at("backends");
  state.web_root = web_root;
  state.index_max_bytes_per_s = request.index_max_bytes_per_s;
  state.product_cache = request.product_cache;
  // Opening reads every header (a damaged or missing file fails here, before serving); computing the
  // statistics is a job per checkpoint, run in the background once the server listens.
  for (const auto& path : request.paths) {
    if (looks_like_acquisition(path)) {  // 4D-STEM: opened (headers) now, products computed on request
      auto sa = std::make_unique<ServedAcquisition>();
      sa->id = std::to_string(state.acquisitions.size()).insert(0, 1, 'a');
      sa->path = path;
      const Acquisition acq = open_acquisition(path);  // refused here when it is no acquisition at all
      std::fprintf(stderr, "tensormorph: acquisition %s: %s (%s)\n", sa->id.c_str(), path.c_str(),
                   acq.complete() ? "complete" : "incomplete: readiness is reported per request");
      state.acquisitions.push_back(std::move(sa));
      continue;
    }
    auto sc = std::make_unique<ServedCheckpoint>();
    sc->id = std::to_string(state.checkpoints.size());
    sc->path = path;
    sc->remote = app::open_remote_if_url(path);  // a URL: headers only, now; tensors when indexed or read
    sc->index = app::open_index(sc->remote ? sc->remote->local_path() : path, "");
    const Checkpoint& c = sc->index->checkpoint();
    if (sc->remote) {
      sc->remote->serve_reads(c, app::indexing_options(*state.compute.current(), {}, true).memory_budget / 4);
      std::fprintf(stderr, "tensormorph: checkpoint %s: %s\n", sc->id.c_str(), sc->remote->transfer_text().c_str());
    }
    for (size_t i = 0; i < c.tensors.size(); ++i) sc->by_name.emplace(c.tensors[i].name, i);
    state.checkpoints.push_back(std::move(sc));
  }
  // Indexing: one job per checkpoint, run in the background once the server listens. Stopping the server
  // cancels it; tensors already committed stay in the index.
  IndexingQueue indexing(state);
  state.indexing = &indexing;
  for (size_t k = 0; k < state.checkpoints.size(); ++k) {
    const auto job = indexing.enqueue(k);
    std::fprintf(stderr, "tensormorph: checkpoint %zu: %s (%zu tensors; indexing is job %s)\n", k,
                 state.checkpoints[k]->path.c_str(), state.checkpoints[k]->index->checkpoint().tensors.size(),
                 job ? job->c_str() : "?");
  }
  std::fprintf(stderr, "tensormorph: web app: %s\n", state.web_root.empty() ? "not built (built-in page)" : state.web_root.c_str());
  opt.on_listening = [&] { indexing.start(); };
  serve(state, opt);
}

}  // namespace tmorph::server
