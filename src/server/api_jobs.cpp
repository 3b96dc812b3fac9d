// The jobs endpoints: GET and POST /api/jobs, GET /api/jobs/{id}, and GET /api/jobs/{id}/events, a Server-Sent
// Events stream of the job's state (one `progress` event per change, at most about ten a second as the
// indexer reports, a comment line every 2 s without change, and a last `done`, `failed` or `cancelled`
// event, after which the stream ends). At most kMaxEventStreams streams are open at once (503 beyond), so
// streams never take every worker thread; each ends when its job does, when the client goes away (the
// next write fails), or when the server stops.
#include <chrono>

#include "server/http_util.h"
#include "server/indexing_queue.h"
#include "server/routes.h"
#include "server/stream_gate.h"

namespace tmorph::server {

namespace {


Job existing_job(const ServerState& state, const std::string& id) {
  auto job = state.jobs.find(id);
  if (!job) throw HttpError(404, "no job with id '" + id + "' (see /api/jobs)");
  return *job;
}

std::string event(const Job& j) {
  const std::string name = j.finished() ? j.state : "progress";
  return "event: " + name + "\nid: " + std::to_string(j.version) + "\ndata: " + job_json(j).dump() + "\n\n";
}

void job_events(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  const Job first = existing_job(state, req.matches[1]);
  if (!state.jobs.try_open_stream(kMaxEventStreams))
    throw HttpError(503, "too many event streams open (at most " + std::to_string(kMaxEventStreams) + "); poll GET /api/jobs/" +
                             first.id + " instead");
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");
  struct Stream {
    uint64_t sent = 0;  // version of the last event written
    bool started = false;
  };
  auto stream = std::make_shared<Stream>();
  const std::string id = first.id;
  res.set_chunked_content_provider(
      "text/event-stream",
      [&state, id, stream](size_t, httplib::DataSink& sink) {
        const auto job = stream->started ? state.jobs.wait(id, stream->sent, kEventHeartbeat) : state.jobs.find(id);
        if (!job || state.jobs.stopping()) {
          sink.done();
          return true;
        }
        std::string out;
        if (!stream->started || job->version > stream->sent || job->finished()) out = event(*job);
        else out = ": waiting\n\n";
        stream->started = true;
        stream->sent = job->version;
        if (!sink.write(out.data(), out.size())) return false;  // the client went away
        if (job->finished()) sink.done();
        return true;
      },
      [&state](bool) { state.jobs.close_stream(); });
}

// POST /api/jobs {"kind": "index", "checkpoint": ID}: indexes the checkpoint again (after a failure, or
// to apply approximation consent given since): what its index already holds is kept. 202 with the job.
void post_job(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  if (req.get_header_value("Content-Type").rfind("application/json", 0) != 0)
    throw HttpError(400, "the body must be JSON (Content-Type: application/json)");
  const nlohmann::json body = body_object(req);
  for (const auto& [key, value] : body.items())
    if (key != "kind" && key != "checkpoint") throw HttpError(400, "field '" + key + "': unknown (expected kind, checkpoint)");
  if (!body.contains("kind") || body["kind"] != "index") throw HttpError(400, "field 'kind': expected \"index\"");
  if (!body.contains("checkpoint") || !body["checkpoint"].is_string()) throw HttpError(400, "field 'checkpoint': expected a checkpoint id");
  const std::string id = body["checkpoint"];
  for (size_t k = 0; k < state.checkpoints.size(); ++k) {
    if (state.checkpoints[k]->id != id) continue;
    const auto job = state.indexing ? state.indexing->enqueue(k) : std::nullopt;
    if (!job) throw HttpError(409, "checkpoint " + id + " is already being indexed (job " + state.checkpoints[k]->job() + ")");
    send_json(res, job_json(*state.jobs.find(*job)), 202);
    return;
  }
  throw HttpError(404, "field 'checkpoint': no checkpoint with id '" + id + "' (see /api/checkpoints)");
}

}  // namespace

void add_job_routes(httplib::Server& svr, ServerState& state) {
  svr.Get("/api/jobs", guarded([&state](const httplib::Request&, httplib::Response& res) {
            nlohmann::json list = nlohmann::json::array();
            for (const Job& j : state.jobs.list()) list.push_back(job_json(j));
            send_json(res, {{"jobs", list}});
          }));
  svr.Post("/api/jobs",
           guarded([&state](const httplib::Request& req, httplib::Response& res) { post_job(state, req, res); }));
  svr.Get(R"(/api/jobs/([^/]+))", guarded([&state](const httplib::Request& req, httplib::Response& res) {
            send_json(res, job_json(existing_job(state, req.matches[1])));
          }));
  svr.Get(R"(/api/jobs/([^/]+)/events)",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { job_events(state, req, res); }));
}

}  // namespace tmorph::server
