// The catalog endpoints: what is served (checkpoints, every tensor with its statistics, one tensor in
// detail). Everything comes from the indexes opened at start; no request reads tensor data.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <tuple>

#include "app/checkpoint_json.h"
#include "app/remote_checkpoint.h"
#include "app/result_json.h"
#include "ops/placement_json.h"

#include "server/http_util.h"
#include "server/routes.h"
#include "server/stats_json.h"

namespace tmorph::server {

namespace {

constexpr uint64_t kDefaultLimit = 10000, kMaxLimit = 100000;

const char* phase_name(ServedCheckpoint::Phase p) {
  switch (p) {
    case ServedCheckpoint::Phase::Indexing: return "indexing";
    case ServedCheckpoint::Phase::Ready: return "ready";
    case ServedCheckpoint::Phase::Failed: return "failed";
  }
  return "";
}

nlohmann::json index_state_json(const ServerState& state, const ServedCheckpoint& sc) {
  const auto phase = sc.phase.load();
  nlohmann::json j = {{"persisted", sc.index->report().persisted}, {"state", phase_name(phase)}, {"job", sc.job()}};
  const auto job = state.jobs.find(sc.job());
  if (phase == ServedCheckpoint::Phase::Failed) {
    j["error"] = sc.failure();
    j["needs_consent"] = job && job->report.is_object() && job->report.value("needs_consent", false);
  }
  if (job && phase == ServedCheckpoint::Phase::Indexing)
    j["progress"] = {{"bytes_done", job->bytes_done}, {"bytes_total", job->bytes_total},
                     {"tensors_done", job->tensors_done}, {"tensors_total", job->tensors_total}};
  return j;
}

nlohmann::json checkpoints_json(const ServerState& state) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& sc : state.checkpoints) {
    const Checkpoint& c = sc->index->checkpoint();
    uint64_t parameters = 0, bytes = 0;
    for (const auto& t : c.tensors) parameters += t.elements, bytes += t.bytes;
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : c.files)
      files.push_back({{"name", std::filesystem::path(f->path()).filename().string()}, {"size", f->size()}});
    list.push_back({{"id", sc->id},
                    {"name", std::filesystem::path(sc->path).lexically_normal().filename().string()},
                    {"path", sc->path},
                    {"format", c.format},
                    {"files", files},
                    {"metadata", c.metadata},
                    {"tensor_count", c.tensors.size()},
                    {"parameters", parameters},
                    {"bytes", bytes},
                    {"index", index_state_json(state, *sc)}});
    if (sc->remote)  // what fetching it has cost so far (docs/remote.md)
      list.back()["remote"] = {{"header_bytes", sc->remote->header_bytes()},
                               {"bytes_received", sc->remote->bytes_received()},
                               {"requests", sc->remote->requests()},
                               {"retries", sc->remote->retries()}};
  }
  return {{"checkpoints", list}};
}

// GET /api/tensors?q=&sort=name|size|dtype&order=asc|desc&limit=&offset=
void list_tensors(const ServerState& state, const httplib::Request& req, httplib::Response& res) {
  const std::string q = text_param(req, "q").value_or("");
  const std::string sort = text_param(req, "sort").value_or("name");
  const std::string order = text_param(req, "order").value_or("asc");
  const uint64_t limit = uint_param(req, "limit").value_or(kDefaultLimit);
  const uint64_t offset = uint_param(req, "offset").value_or(0);
  if (sort != "name" && sort != "size" && sort != "dtype")
    throw HttpError(400, "parameter 'sort': expected name, size or dtype, got '" + sort + "'");
  if (order != "asc" && order != "desc") throw HttpError(400, "parameter 'order': expected asc or desc, got '" + order + "'");
  if (limit > kMaxLimit) throw HttpError(400, "parameter 'limit': at most " + std::to_string(kMaxLimit));
  if (q.size() > 1024) throw HttpError(400, "parameter 'q': longer than 1024 bytes");

  std::shared_lock<std::shared_mutex> rows_lock(state.rows_mutex);
  std::vector<const TensorRow*> rows;
  for (const auto& r : state.rows)
    if (q.empty() || r.name.find(q) != std::string::npos) rows.push_back(&r);
  // Ties fall back to (checkpoint, name), so the order is total and pages are stable.
  const auto key = [&](const TensorRow* r) { return std::tie(r->checkpoint, r->name); };
  std::function<bool(const TensorRow*, const TensorRow*)> less;
  if (sort == "name") less = [&](auto a, auto b) { return std::tie(a->name, a->checkpoint) < std::tie(b->name, b->checkpoint); };
  else if (sort == "size") less = [&](auto a, auto b) { return a->bytes != b->bytes ? a->bytes < b->bytes : key(a) < key(b); };
  else less = [&](auto a, auto b) { return a->dtype != b->dtype ? a->dtype < b->dtype : key(a) < key(b); };
  if (order == "desc") std::sort(rows.begin(), rows.end(), [&](auto a, auto b) { return less(b, a); });
  else std::sort(rows.begin(), rows.end(), less);

  nlohmann::json list = nlohmann::json::array();
  for (uint64_t k = offset; k < rows.size() && k < offset + limit; ++k) list.push_back(rows[k]->summary);
  send_json(res, {{"total", rows.size()}, {"offset", offset}, {"limit", limit}, {"sort", sort}, {"order", order},
                  {"tensors", list}});
}

// GET /api/tensors/{ckpt}/{name}
void tensor_detail(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  const TensorRef ref = find_tensor(state, req.matches[1], req.matches[2]);
  const CheckpointTensor& t = ref.info();
  nlohmann::json j = tensor_identity(ref.checkpoint, t);
  if (!t.ne.empty()) j["ne"] = t.ne;
  std::lock_guard<std::mutex> lock(ref.checkpoint.mutex);
  const CheckpointIndex& index = *ref.checkpoint.index;
  const auto stats = index.has_stats(ref.tensor) ? index.load_stats(ref.tensor) : std::nullopt;
  j["stats"] = stats ? app::stats_json(*stats) : nlohmann::json(nullptr);
  j["placement"] = stats ? placements_json(stats->placement) : nlohmann::json::array();
  if (!stats) {
    std::shared_lock<std::shared_mutex> rows_lock(state.rows_mutex);
    for (const auto& r : state.rows)
      if (&*state.checkpoints[r.checkpoint] == &ref.checkpoint && r.tensor == ref.tensor)
        j["unavailable"] = r.summary.value("unavailable", "");
  }
  j["quantization"] = app::quantization_json(ref.checkpoint.index->checkpoint(), t, /*file_names_only=*/true);
  const auto info = index.load_pyramid_info(ref.tensor);
  j["pyramid"] = info ? pyramid_json(*info) : nlohmann::json(nullptr);
  send_json(res, j);
}

}  // namespace

void add_catalog_routes(httplib::Server& svr, ServerState& state) {
  svr.Get("/api/health", guarded([&state](const httplib::Request&, httplib::Response& res) {
            send_json(res, {{"name", "tensormorph"}, {"version", state.version}, {"status", "ok"}});
          }));
  svr.Get("/api/checkpoints",
          guarded([&state](const httplib::Request&, httplib::Response& res) { send_json(res, checkpoints_json(state)); }));
  svr.Get("/api/tensors",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { list_tensors(state, req, res); }));
  // The name takes the rest of the path: tensor names contain dots and slashes. httplib has already
  // percent-decoded the path, so %2F and / are the same.
  svr.Get(R"(/api/tensors/([^/]+)/(.+))",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { tensor_detail(state, req, res); }));
}

}  // namespace tmorph::server
