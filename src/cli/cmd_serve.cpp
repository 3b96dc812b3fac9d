// tensormorph serve: opens the checkpoints named on the command line, serves the viewer and its JSON API
// (src/server, docs/api.md) until SIGINT or SIGTERM, and indexes them meanwhile, one job per checkpoint.
#include <stdlib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>

#include "cli/commands.h"
#include "cli/index_access.h"
#include "cli/parity_matrix.h"
#include "cli/runtime.h"
#include "server/auth.h"
#include "server/indexing_queue.h"
#include "server/server.h"
#include "tensormorph/error.h"

#ifndef TM_VERSION
#define TM_VERSION "dev"
#endif
#ifndef TM_SOURCE_DIR
#define TM_SOURCE_DIR ""
#endif

namespace tmorph::cli {

namespace {

namespace fs = std::filesystem;

struct ServeArgs {
  std::vector<std::string> paths;
  std::string host = "127.0.0.1", token, web_root, index_max_rate;
  int port = 8765;
  bool generate_token = false;
  unsigned http_threads = 0;
};

// The built web app: --web-root, else web/dist beside the binary, one folder up, or in the source tree.
// Returns the canonical directory, or empty for the built-in page.
std::string find_web_root(const std::string& given) {
  std::error_code ec;
  if (!given.empty()) {
    const fs::path p = fs::canonical(given, ec);
    if (ec || !fs::is_directory(p, ec)) throw Error(ErrorKind::InvalidArgument, "--web-root " + given + ": not a directory");
    if (p == p.root_path()) throw Error(ErrorKind::InvalidArgument, "--web-root " + given + ": refusing to serve the root directory");
    return p.string();
  }
  const std::string exe = executable_dir();
  for (const auto& dir : {exe + "/web/dist", exe + "/../web/dist", std::string(TM_SOURCE_DIR) + "/web/dist"}) {
    if (dir == "/web/dist") continue;  // no source dir compiled in
    const fs::path p = fs::canonical(dir, ec);
    if (!ec && fs::is_regular_file(p / "index.html", ec)) return p.string();
  }
  return {};
}

// A private directory (mode 0700) for the PNGs the server encodes, removed when the server ends.
struct ScratchDir {
  std::string path;
  ScratchDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/tensormorph-serve-XXXXXX";
    if (!::mkdtemp(templ.data())) throw Error(ErrorKind::Io, templ + ": cannot create a scratch directory");
    path = templ;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void run_serve(const ServeArgs& a) {
  server::ServeOptions opt;
  opt.host = a.host, opt.port = a.port, opt.threads = a.http_threads;
  if (a.generate_token && !a.token.empty()) throw Error(ErrorKind::InvalidArgument, "give --token or --generate-token, not both");
  static const std::regex token_re("[A-Za-z0-9._~-]{8,256}");
  if (!a.token.empty() && !std::regex_match(a.token, token_re))
    throw Error(ErrorKind::InvalidArgument, "--token: 8 to 256 characters among letters, digits and . _ ~ -");
  opt.token = a.generate_token ? server::generate_token() : a.token;
  // Refused before any indexing, so a mistake costs nothing.
  if (!server::is_loopback_host(a.host) && opt.token.empty())
    throw Error(ErrorKind::InvalidArgument, "--host " + a.host + " is not loopback: give --token TOKEN or --generate-token "
                                            "(every request must then carry it)");
  if (a.port < 0 || a.port > 65535) throw Error(ErrorKind::InvalidArgument, "--port: expected 0..65535");
  if (a.http_threads > 256) throw Error(ErrorKind::InvalidArgument, "--http-threads: at most 256");

  server::ServerState state([] { return make_runtime(nullptr); });
  state.version = TM_VERSION;
  state.known_backends = nlohmann::json::parse(kParityMatrixJson).at("backends");
  state.web_root = find_web_root(a.web_root);
  if (!a.index_max_rate.empty()) {
    state.index_max_bytes_per_s = parse_bytes(a.index_max_rate, "--index-max-rate");
    if (state.index_max_bytes_per_s == 0) throw Error(ErrorKind::InvalidArgument, "--index-max-rate: expected more than 0 bytes per second");
  }
  // Opening reads every header (a damaged or missing file fails here, before serving); computing the
  // statistics is a job per checkpoint, run in the background once the server listens.
  for (const auto& path : a.paths) {
    auto sc = std::make_unique<server::ServedCheckpoint>();
    sc->id = std::to_string(state.checkpoints.size());
    sc->path = path;
    sc->index = open_index(path, "");
    const Checkpoint& c = sc->index->checkpoint();
    for (size_t i = 0; i < c.tensors.size(); ++i) sc->by_name.emplace(c.tensors[i].name, i);
    state.checkpoints.push_back(std::move(sc));
  }
  // Indexing: one job per checkpoint, run in the background once the server listens. Stopping the server
  // cancels it; tensors already committed stay in the index.
  server::IndexingQueue indexing(state);
  state.indexing = &indexing;
  for (size_t k = 0; k < state.checkpoints.size(); ++k) {
    const auto job = indexing.enqueue(k);
    std::fprintf(stderr, "tensormorph: checkpoint %zu: %s (%zu tensors; indexing is job %s)\n", k,
                 state.checkpoints[k]->path.c_str(), state.checkpoints[k]->index->checkpoint().tensors.size(),
                 job ? job->c_str() : "?");
  }
  std::fprintf(stderr, "tensormorph: web app: %s\n", state.web_root.empty() ? "not built (built-in page)" : state.web_root.c_str());
  const ScratchDir scratch;
  state.scratch_dir = scratch.path;
  opt.on_listening = [&] { indexing.start(); };
  server::serve(state, opt);
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "serve the viewer and its JSON API (docs/api.md) for checkpoints, indexing "
                                              "them first");
  cmd->add_option("paths", a->paths, "checkpoints: files, shard directories, index JSONs or GGUF split shards")->required();
  cmd->add_option("--port", a->port, "TCP port (default 8765; 0: pick a free one, printed)");
  cmd->add_option("--host", a->host, "address to bind (default 127.0.0.1; any other needs a token)");
  cmd->add_option("--token", a->token, "require this token on every request (Bearer header, ?token= or cookie)");
  cmd->add_flag("--generate-token", a->generate_token, "require a random token (128 bits from /dev/urandom), printed in the URL");
  cmd->add_option("--web-root", a->web_root, "serve the web app from this directory (default: web/dist beside the binary "
                                             "or in the source tree)");
  cmd->add_option("--http-threads", a->http_threads,
                  "worker threads, one per open connection (default: max(8, 2 x cores) up to 64; at most 256)");
  cmd->add_option("--index-max-rate", a->index_max_rate,
                  "indexing jobs read at most this many bytes per second on average (e.g. 200M; default: as fast as "
                  "the disk allows), leaving the disk to other work");
  cmd->callback([a] { run_serve(*a); });
}

}  // namespace tmorph::cli
