#include "server/server.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include <httplib.h>

#include "server/auth.h"
#include "server/bounded_server.h"
#include "server/http_util.h"
#include "server/routes.h"
#include "tensormorph/error.h"

namespace tmorph::server {

namespace {

constexpr size_t kMaxBodyBytes = size_t{1} << 20;
constexpr int kListenBacklog = 1024;  // connections the kernel queues before they are accepted

// Signals reach the serving loop through a pipe (write() is async-signal-safe), whichever thread the
// kernel delivers them to.
int g_signal_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int) {
  const char byte = 's';
  [[maybe_unused]] const ssize_t n = ::write(g_signal_pipe[1], &byte, 1);
}

std::string url_host(const std::string& host) { return host.find(':') != std::string::npos ? "[" + host + "]" : host; }

ConnectionLimits limits_for(const ServeOptions& o) {
  ConnectionLimits l;
  l.bounds.total = static_cast<size_t>(o.threads);  // check_serve_options: 1..kMaxHttpThreads
  l.bounds.per_peer = (l.bounds.total + 1) / 2;
  return l;  // deadlines and keep-alive: ConnectionLimits' defaults (10 s, 5 s, 100 requests, 10 s per write)
}

void configure(BoundedServer& svr, ServerState& state, const ServeOptions& o) {
  svr.set_payload_max_length(kMaxBodyBytes);
  // httplib's default also sets SO_REUSEPORT, which would let a second server share the port silently.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  svr.set_default_headers({{"X-Content-Type-Options", "nosniff"}, {"Referrer-Policy", "no-referrer"}});
  const std::string token = o.token;
  svr.set_pre_routing_handler([token](const httplib::Request& req, httplib::Response& res) {
    return admit(token, req, res) ? httplib::Server::HandlerResponse::Unhandled : httplib::Server::HandlerResponse::Handled;
  });
  // Statuses httplib sets itself (404 for an unknown route or method, 413, 400 for a malformed
  // request, which is a 408 when the request's deadline cut it short) get a JSON body like every other error.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([timeout = svr.timeout_message()](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 400 && BoundedServer::request_timed_out()) {
      res.status = 408;
      res.set_header("Connection", "close");
      send_error(res, 408, timeout);
      return httplib::Server::HandlerResponse::Handled;
    }
    send_error(res, res.status, res.status == 404   ? "not found"
                                : res.status == 413 ? "request body over " + std::to_string(kMaxBodyBytes) + " bytes"
                                                    : "bad request");
    return httplib::Server::HandlerResponse::Handled;
  }));
  add_catalog_routes(svr, state);
  add_tile_routes(svr, state);
  add_compute_routes(svr, state);
  add_job_routes(svr, state);
  add_stem_routes(svr, state);
  add_diff_routes(svr, state);
  add_progress_routes(svr, state);
  add_static_routes(svr, state);
}

}  // namespace

void check_serve_options(const ServeOptions& o) {
  if (!is_loopback_host(o.host) && o.token.empty())
    throw Error(ErrorKind::InvalidArgument, "--host " + o.host + " is not loopback: give --token TOKEN or --generate-token "
                                            "(every request must then carry it)");
  if (o.port < 0 || o.port > 65535) throw Error(ErrorKind::InvalidArgument, "--port: expected 0..65535");
  if (o.threads < 1 || o.threads > kMaxHttpThreads)
    throw Error(ErrorKind::InvalidArgument, "--http-threads: expected 1 to " + std::to_string(kMaxHttpThreads) +
                                                " connections served at once, not " + std::to_string(o.threads));
}

void serve(ServerState& state, const ServeOptions& o) {
  check_serve_options(o);
  BoundedServer svr(limits_for(o));
  configure(svr, state, o);
  int port = o.port;
  if (port == 0) port = svr.bind_to_any_port(o.host);
  else if (!svr.bind_to_port(o.host, port)) port = -1;
  if (port <= 0)
    throw Error(ErrorKind::Io, "cannot listen on " + o.host + ":" + std::to_string(o.port) +
                                   " (address in use, or not an address of this machine)");
  if (!svr.set_listen_backlog(kListenBacklog)) throw Error(ErrorKind::Io, "cannot set the listen queue of " + o.host);

  if (::pipe(g_signal_pipe) != 0) throw Error(ErrorKind::Io, "cannot create the signal pipe");
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {}, old_term {};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up mid-response is an error on its socket only

  std::atomic<bool> listener_done{false};
  std::thread listener([&] {
    svr.listen_after_bind();
    listener_done = true;
    on_stop_signal(0);  // wakes the loop below when listening ended by itself
  });
  if (o.on_listening) o.on_listening();
  std::string url = "http://" + url_host(o.host) + ":" + std::to_string(port) + "/";
  if (!o.token.empty()) url += "?token=" + o.token;
  if (state.acquisitions.empty()) std::printf("tensormorph: serving %zu checkpoint(s) on %s\n", state.checkpoints.size(), url.c_str());
  else std::printf("tensormorph: serving %zu checkpoint(s) and %zu acquisition(s) on %s\n", state.checkpoints.size(),
                   state.acquisitions.size(), url.c_str());
  std::fflush(stdout);

  pollfd p{g_signal_pipe[0], POLLIN, 0};
  while (::poll(&p, 1, -1) < 0) {
  }
  // stop() is a no-op until the listener has started listening, and may be called only once.
  while (!listener_done && !svr.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  state.jobs.shutdown();  // ends the event streams, which would otherwise hold their workers
  state.readiness_streams.stop();
  if (!listener_done) svr.stop_serving();
  listener.join();
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);
  g_signal_pipe[0] = g_signal_pipe[1] = -1;
  std::printf("tensormorph: server stopped\n");
  std::fflush(stdout);
}

}  // namespace tmorph::server
