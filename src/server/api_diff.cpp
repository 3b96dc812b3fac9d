// The difference of two served checkpoints (docs/api.md "Differences"), through src/diff's own code:
//   GET /api/diff/{a}/{b}?top=N                          the document `tensormorph diff A B --json` prints
//   GET /api/diff/{a}/{b}/tiles/{tensor}?level=&slice=[&x=&y=|&window=X0,X1,Y0,Y1]
//                                                        difference-pyramid tiles as JSON (one with its histogram,
//                                                        or a window of a level, at most kMaxDiffTilesPerRequest)
//   GET /api/diff/{a}/{b}/values/{tensor}?level=&x=&y=[&slice=]
//                                                        one tile's Δ = b - a, little-endian float64, row-major
// {a} and {b} are checkpoint ids ("0", "1", …); the files are the ones `serve` was started on, read directly
// (their indexing jobs are not waited for). A pair's pyramid is computed on its first request and stored in the
// difference index (diff/diff_store.h: the cache location, keyed by both checkpoints' file identities), so a later
// server reads it back; this server also keeps the whole diff's summaries and the last kCachedPyramids pairs'
// tiles in memory. Computing (and reading values) holds state.render_mutex: the dequantization ops of a quantized
// pair are placed ops, and a backend promises nothing about concurrent calls.
//
// Errors (http_util.h): 400 naming the parameter, 404 an unknown checkpoint id or tensor (or one without a
// counterpart in B), 409 a pair the diff refuses to compare (shapes or dtypes differ: the diff's reason).
#include <bit>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include "app/diff_document.h"
#include "app/result_json.h"
#include "diff/checkpoint_diff.h"
#include "diff/diff_params.h"
#include "lod/view.h"
#include "ops/placement_json.h"
#include "app/remote_checkpoint.h"
#include "server/declared_query.h"
#include "server/http_util.h"
#include "server/routes.h"
#include "tensormorph/error.h"

namespace tmorph::server {

namespace {

constexpr size_t kCachedPyramids = 8;               // pairs whose tiles are kept in memory
constexpr uint64_t kMaxValuesPerRequest = 1u << 20;  // Δ values of one GET …/values (8 MiB)

// What this server has computed, by "a|b" (documents) and "a|b|tensor" (pairs with their tiles).
struct DiffCache {
  std::mutex mutex;  // guards the maps only; computing holds state.render_mutex
  std::map<std::string, std::shared_ptr<const CheckpointDiff>> diffs;
  std::list<std::pair<std::string, std::shared_ptr<const PairDiff>>> pairs;  // most recent first

  std::shared_ptr<const CheckpointDiff> diff(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = diffs.find(key);
    return it == diffs.end() ? nullptr : it->second;
  }
  std::shared_ptr<const PairDiff> pair(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = pairs.begin(); it != pairs.end(); ++it)
      if (it->first == key) {
        pairs.splice(pairs.begin(), pairs, it);
        return pairs.front().second;
      }
    return nullptr;
  }
  void put(const std::string& key, std::shared_ptr<const PairDiff> p) {
    std::lock_guard<std::mutex> lock(mutex);
    pairs.emplace_front(key, std::move(p));
    while (pairs.size() > kCachedPyramids) pairs.pop_back();
  }
};

const ServedCheckpoint& served_checkpoint(const ServerState& state, const std::string& id) {
  for (const auto& c : state.checkpoints)
    if (c->id == id) return *c;
  throw HttpError(404, "no checkpoint with id '" + id + "' (see /api/checkpoints)");
}

DiffOptions options_for(const app::Runtime& rt) {
  DiffOptions o;
  o.threads = rt.threads;
  return o;
}

// The whole diff of a and b (summaries only), computed on the first request.
std::shared_ptr<const CheckpointDiff> whole_diff(ServerState& state, DiffCache& cache, const ServedCheckpoint& a,
                                                 const ServedCheckpoint& b) {
  const std::string key = a.id + "|" + b.id;
  if (auto d = cache.diff(key)) return d;
  const auto rt = state.compute.current();
  std::lock_guard<FifoMutex> compute_lock(state.render_mutex);
  if (auto d = cache.diff(key)) return d;  // computed while this request waited
  // A remote side's tensors fetched pair by pair through its served RemoteCheckpoint (app::RemotePair).
  app::RemotePair remote(a.path, b.path, a.remote.get(), b.remote.get());
  DiffOptions o = options_for(*rt);
  o.around_pair = remote.around_pair();
  auto d = std::make_shared<const CheckpointDiff>(diff_checkpoints(remote.path_a(), remote.path_b(), rt->planner(), o));
  std::lock_guard<std::mutex> lock(cache.mutex);
  cache.diffs[key] = d;
  return d;
}

// The pair of A's tensor `name` with every tile of its pyramid. 404 when A has no such tensor or B no
// counterpart, 409 when the diff refuses to compare them (with its reason).
std::shared_ptr<const PairDiff> pair_with_tiles(ServerState& state, DiffCache& cache, const ServedCheckpoint& a,
                                                const ServedCheckpoint& b, const std::string& name) {
  if (!a.by_name.count(name)) throw HttpError(404, "checkpoint " + a.id + " has no tensor named '" + name + "'");
  const std::string key = a.id + "|" + b.id + "|" + name;
  if (auto p = cache.pair(key)) return p;
  const auto rt = state.compute.current();
  std::lock_guard<FifoMutex> compute_lock(state.render_mutex);
  if (auto p = cache.pair(key)) return p;
  DiffOptions o = options_for(*rt);
  o.tensors = {name};
  o.keep_tiles = true;
  app::RemotePair remote(a.path, b.path, a.remote.get(), b.remote.get());
  o.around_pair = remote.around_pair();
  CheckpointDiff d;
  try {
    d = diff_checkpoints(remote.path_a(), remote.path_b(), rt->planner(), o);
  } catch (const Error& e) {
    // With one named tensor and the default index, InvalidArgument is "no counterpart in B".
    if (e.kind() == ErrorKind::InvalidArgument) throw HttpError(404, e.what());
    throw;
  }
  for (const Skipped& s : d.skipped)
    if (s.name == name)
      throw HttpError(409, "tensor '" + name + "' of checkpoint " + a.id + " is not compared with checkpoint " + b.id + ": " + s.reason);
  if (d.pairs.size() != 1) throw Error(ErrorKind::Internal, "diff of one tensor '" + name + "' gave " + std::to_string(d.pairs.size()) + " pairs");
  auto p = std::make_shared<const PairDiff>(std::move(d.pairs.front()));
  cache.put(key, p);
  return p;
}

uint64_t required_count(const std::optional<uint64_t>& v, const char* name) {
  if (!v) throw HttpError(400, std::string("parameter '") + name + "' is required");
  return *v;
}

// Checks (level, slice) against the pair's pyramid, naming the parameter out of range.
void check_level_slice(const PyramidLayout& l, uint64_t level, uint64_t slice) {
  if (level >= l.levels.size())
    throw HttpError(400, "parameter 'level': " + std::to_string(level) + " is outside the difference pyramid's levels 0.." +
                             std::to_string(l.levels.size() - 1));
  if (slice >= l.view.slices)
    throw HttpError(400, "parameter 'slice': " + std::to_string(slice) + " is outside the view's " + std::to_string(l.view.slices) +
                             " slice(s)");
}

void check_tile(const PyramidLayout& l, unsigned level, uint64_t x, uint64_t y) {
  const auto& g = l.levels[level];
  if (x >= g.cols)
    throw HttpError(400, "parameter 'x': level " + std::to_string(level) + " has " + std::to_string(g.cols) + " tile column(s)");
  if (y >= g.rows) throw HttpError(400, "parameter 'y': level " + std::to_string(level) + " has " + std::to_string(g.rows) + " tile row(s)");
}

nlohmann::json layout_json(const PyramidLayout& l) {
  nlohmann::json levels = nlohmann::json::array();
  for (const auto& g : l.levels) levels.push_back({{"rows", g.rows}, {"cols", g.cols}});
  return {{"view", {{"slices", l.view.slices}, {"rows", l.view.rows}, {"cols", l.view.cols}, {"spec", view_spec(l.view)}}},
          {"tile_rows", l.tile_rows},
          {"tile_cols", l.tile_cols},
          {"levels", levels}};
}

nlohmann::json diff_tile_json(const PairDiff& p, unsigned level, uint64_t slice, uint64_t ty, uint64_t tx, bool histogram) {
  const TileRange r = p.pyramid.layout.range(level, ty, tx);
  nlohmann::json t = app::diff_stats_json(p.pyramid.tile(level, slice, ty, tx), histogram ? &p.pyramid.edges : nullptr);
  t.update({{"tx", tx}, {"ty", ty}, {"row_begin", r.row_begin}, {"row_end", r.row_end}, {"col_begin", r.col_begin}, {"col_end", r.col_end}});
  return t;
}

// GET /api/diff/{a}/{b}?top=N
void get_document(ServerState& state, DiffCache& cache, const httplib::Request& req, httplib::Response& res) {
  const DeclaredQuery q(req, diff_document_params());
  const ServedCheckpoint& a = served_checkpoint(state, req.matches[1]);
  const ServedCheckpoint& b = served_checkpoint(state, req.matches[2]);
  app::DiffDocumentOptions o;
  o.top = q.count("top").value_or(10);
  nlohmann::json doc = app::diff_document(*whole_diff(state, cache, a, b), o);
  for (const ServedCheckpoint* sc : {&a, &b})
    if (sc->remote) sc->remote->show_given(doc, sc->path);  // URLs, not the stand-ins' paths
  doc["checkpoint_a"] = a.id;
  doc["checkpoint_b"] = b.id;
  send_json(res, doc);
}

// GET /api/diff/{a}/{b}/tiles/{tensor}?level=&slice=[&x=&y=|&window=X0,X1,Y0,Y1]
void get_tiles(ServerState& state, DiffCache& cache, const httplib::Request& req, httplib::Response& res) {
  const DeclaredQuery q(req, diff_tiles_params());
  const uint64_t level = required_count(q.count("level"), "level");
  const uint64_t slice = q.count("slice").value_or(0);
  const auto x = q.count("x"), y = q.count("y");
  const auto window = q.counts("window");
  if (x.has_value() != y.has_value()) throw HttpError(400, std::string("parameter '") + (x ? "y" : "x") + "' is required with the other");
  if (x && window) throw HttpError(400, "parameter 'window': give either x and y (one tile) or a window, not both");
  const ServedCheckpoint& a = served_checkpoint(state, req.matches[1]);
  const ServedCheckpoint& b = served_checkpoint(state, req.matches[2]);
  const auto p = pair_with_tiles(state, cache, a, b, req.matches[3]);
  const PyramidLayout& l = p->pyramid.layout;
  check_level_slice(l, level, slice);
  const unsigned lv = static_cast<unsigned>(level);
  nlohmann::json j = {{"checkpoint_a", a.id}, {"checkpoint_b", b.id}, {"name", p->name_a}, {"name_b", p->name_b},
                      {"level", level}, {"slice", slice}, {"rows", p->qk && p->qk->unpermute ? "unpermuted" : "stored"}};
  if (x) {
    check_tile(l, lv, *x, *y);
    j.update(diff_tile_json(*p, lv, slice, *y, *x, true));
    send_json(res, j);
    return;
  }
  const auto& g = l.levels[lv];
  uint64_t x0 = 0, x1 = g.cols, y0 = 0, y1 = g.rows;
  if (window) {
    x0 = (*window)[0], x1 = (*window)[1], y0 = (*window)[2], y1 = (*window)[3];
    if (x0 >= x1 || y0 >= y1 || x1 > g.cols || y1 > g.rows)
      throw HttpError(400, "parameter 'window': expected X0 < X1 <= " + std::to_string(g.cols) + " and Y0 < Y1 <= " + std::to_string(g.rows) +
                               " (level " + std::to_string(level) + "'s tile columns and rows, half-open)");
  }
  const uint64_t n = (x1 - x0) * (y1 - y0);
  if (n > kMaxDiffTilesPerRequest)
    throw HttpError(400, "parameter 'window': " + std::to_string(n) + " tiles of level " + std::to_string(level) + ", more than the " +
                             std::to_string(kMaxDiffTilesPerRequest) + " answered at once: give a smaller window or a coarser level");
  nlohmann::json tiles = nlohmann::json::array();
  for (uint64_t ty = y0; ty < y1; ++ty)
    for (uint64_t tx = x0; tx < x1; ++tx) tiles.push_back(diff_tile_json(*p, lv, slice, ty, tx, false));
  j.update(layout_json(l));
  j["window"] = {x0, x1, y0, y1};
  j["grid"] = {{"rows", g.rows}, {"cols", g.cols}};
  j["difference"] = app::diff_stats_json(p->summary, &p->pyramid.edges);
  j["placement"] = placements_json(p->placement);
  j["reused"] = p->reused;
  j["tiles"] = std::move(tiles);
  send_json(res, j);
}

// GET /api/diff/{a}/{b}/values/{tensor}?level=&x=&y=[&slice=]
void get_values(ServerState& state, DiffCache& cache, const httplib::Request& req, httplib::Response& res) {
  const DeclaredQuery q(req, diff_values_params());
  const uint64_t level = required_count(q.count("level"), "level");
  const uint64_t x = required_count(q.count("x"), "x"), y = required_count(q.count("y"), "y");
  const uint64_t slice = q.count("slice").value_or(0);
  const ServedCheckpoint& a = served_checkpoint(state, req.matches[1]);
  const ServedCheckpoint& b = served_checkpoint(state, req.matches[2]);
  const auto p = pair_with_tiles(state, cache, a, b, req.matches[3]);
  const PyramidLayout& l = p->pyramid.layout;
  check_level_slice(l, level, slice);
  check_tile(l, static_cast<unsigned>(level), x, y);
  const TileRange r = l.range(static_cast<unsigned>(level), y, x);
  const uint64_t n = (r.row_end - r.row_begin) * (r.col_end - r.col_begin);
  if (n > kMaxValuesPerRequest)
    throw HttpError(400, "parameter 'level': a level-" + std::to_string(level) + " tile holds " + std::to_string(n) + " values, more than the " +
                             std::to_string(kMaxValuesPerRequest) + " answered at once: ask a finer level");
  const auto rt = state.compute.current();
  TileDelta t;
  {
    std::lock_guard<FifoMutex> compute_lock(state.render_mutex);
    app::RemotePair remote(a.path, b.path, a.remote.get(), b.remote.get());
    t = diff_tile_values(remote.path_a(), remote.path_b(), p->name_a, static_cast<unsigned>(level), slice, y, x, rt->planner(),
                         remote.around_pair());
  }
  static_assert(std::endian::native == std::endian::little, "the values body is little-endian float64");
  std::string body(t.delta.size() * sizeof(double), '\0');
  if (!t.delta.empty()) std::memcpy(body.data(), t.delta.data(), body.size());
  res.set_content(std::move(body), "application/octet-stream");
  const auto two = [](uint64_t u, uint64_t v) { return std::to_string(u) + "," + std::to_string(v); };
  res.set_header("X-Tensormorph-Tile-Rows", two(t.range.row_begin, t.range.row_end));
  res.set_header("X-Tensormorph-Tile-Cols", two(t.range.col_begin, t.range.col_end));
  res.set_header("Cache-Control", "no-store");
}

}  // namespace

void add_diff_routes(httplib::Server& svr, ServerState& state) {
  auto cache = std::make_shared<DiffCache>();
  svr.Get(R"(/api/diff/([^/]+)/([^/]+))",
          guarded([&state, cache](const httplib::Request& req, httplib::Response& res) { get_document(state, *cache, req, res); }));
  svr.Get(R"(/api/diff/([^/]+)/([^/]+)/tiles/(.+))",
          guarded([&state, cache](const httplib::Request& req, httplib::Response& res) { get_tiles(state, *cache, req, res); }));
  svr.Get(R"(/api/diff/([^/]+)/([^/]+)/values/(.+))",
          guarded([&state, cache](const httplib::Request& req, httplib::Response& res) { get_values(state, *cache, req, res); }));
}

}  // namespace tmorph::server
