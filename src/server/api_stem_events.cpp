// GET /api/acquisitions/{id}/events: the acquisition's readiness as Server-Sent Events, so the viewer learns
// that a scan still being written has become complete (or lost a file) without polling.
//
// Contract: the first event is the current summary (GET /api/acquisitions/{id}'s document) at once; then the
// acquisition is reopened (headers only) every kPoll and an event sent whenever its readiness (status,
// frames_present, frames_expected, problems) differs from the last one sent. Each event is
//   event: readiness | error      (error: the reopen failed; data {"error": MESSAGE}; polling goes on)
//   id: N                          (1, 2, … in this stream)
//   data: {…}
// A comment line (": waiting") goes out every kEventHeartbeat without an event, so a client that went away is noticed
// (the write fails) and its stream freed within that time. At most kMaxEventStreams readiness streams are open at
// once (503 beyond: poll GET /api/acquisitions/{id}); every stream ends when the server stops
// (state.readiness_streams.stop()), without waiting for the next poll.
#include <chrono>
#include <memory>

#include "server/http_util.h"
#include "server/routes.h"
#include "server/stem_request.h"
#include "server/stream_gate.h"

namespace tmorph::server {

namespace {

constexpr auto kPoll = std::chrono::milliseconds(500);

// What a change is: the summary's readiness without its per-file list (whose details move while files grow).
nlohmann::json readiness_key(const nlohmann::json& summary) {
  const nlohmann::json& r = summary.at("readiness");
  return nlohmann::json::array({r.at("status"), r.at("frames_present"), r.at("frames_expected"), r.at("problems")});
}

struct ReadinessStream {
  ServedAcquisition* served = nullptr;
  nlohmann::json first;          // the summary read by the handler, sent as the first event
  nlohmann::json last_key;       // readiness of the last event sent, or {"error": …} after a failed reopen
  uint64_t sent = 0;             // events sent
  std::chrono::steady_clock::time_point last_write;
};

std::string sse(const char* name, uint64_t id, const nlohmann::json& data) {
  return std::string("event: ") + name + "\nid: " + std::to_string(id) + "\ndata: " + data.dump() + "\n\n";
}

// The next piece of the stream once a poll is due: an event when the readiness changed (or the reopen failed
// with a new message), a heartbeat when nothing was written for kEventHeartbeat, else nothing.
std::string next_piece(ReadinessStream& s) {
  nlohmann::json summary, key;
  const char* name = "readiness";
  try {
    summary = summary_json(*s.served, reopen(*s.served));
    key = readiness_key(summary);
  } catch (const std::exception& e) {
    name = "error";
    summary = {{"error", e.what()}};
    key = summary;
  }
  if (key != s.last_key) {
    s.last_key = std::move(key);
    return sse(name, ++s.sent, summary);
  }
  if (std::chrono::steady_clock::now() - s.last_write >= kEventHeartbeat) return ": waiting\n\n";
  return {};
}

void acquisition_events(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  ServedAcquisition& served = find_acquisition(state, req.matches[1]);
  auto stream = std::make_shared<ReadinessStream>();
  stream->served = &served;
  stream->first = summary_json(served, reopen(served));  // an acquisition that cannot be opened: an HTTP error
  if (!state.readiness_streams.try_open(kMaxEventStreams))
    throw HttpError(503, "too many readiness streams open (at most " + std::to_string(kMaxEventStreams) + "); poll GET /api/acquisitions/" +
                             served.id + " instead");
  res.set_header("Cache-Control", "no-store");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [&state, stream](size_t, httplib::DataSink& sink) {
        std::string out;
        if (stream->sent == 0) {
          stream->last_key = readiness_key(stream->first);
          out = sse("readiness", ++stream->sent, stream->first);
          stream->first = nullptr;
        } else {
          if (state.readiness_streams.wait_stop(kPoll)) {  // the server is stopping
            sink.done();
            return true;
          }
          out = next_piece(*stream);
          if (out.empty()) return true;  // called again at once: the next poll
        }
        stream->last_write = std::chrono::steady_clock::now();
        return sink.write(out.data(), out.size());  // false: the client went away
      },
      [&state](bool) { state.readiness_streams.close(); });
}

}  // namespace

void add_stem_event_routes(httplib::Server& svr, ServerState& state) {
  svr.Get(R"(/api/acquisitions/([^/]+)/events)",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { acquisition_events(state, req, res); }));
}

}  // namespace tmorph::server
