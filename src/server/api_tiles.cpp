// Pyramid tiles (raw statistics, binary or JSON) and rendered PNGs of a tensor. Tiles come from the
// index; images through the same code as `tensormorph render` (render_tensor), so sizes are
// bounded by the pyramid's levels and the renderer's own pixel limit.
#include <bit>
#include <cstring>
#include <cstdio>
#include <tuple>

#include "display/colormap.h"
#include "render/cell_image.h"
#include "render/tensors/cell_source.h"
#include "render/tensors/outliers.h"
#include "render/tensors/profile.h"
#include "image/png_encoder.h"
#include "render/tensors/tensor_render.h"
#include "render/tensors/view_params.h"
#include "server/declared_query.h"
#include "server/http_util.h"
#include "server/routes.h"
#include "tensormorph/error.h"

namespace tmorph::server {

namespace {

// Checks (level, slice, x, y) against a layout, naming the query parameter that is out of range.
void check_position(const PyramidLayout& l, uint64_t level, uint64_t slice, std::optional<uint64_t> x,
                    std::optional<uint64_t> y) {
  if (level >= l.levels.size())
    throw HttpError(400, "parameter 'level': " + std::to_string(level) + " is outside the pyramid's levels 0.." +
                             std::to_string(l.levels.size() - 1));
  if (slice >= l.view.slices)
    throw HttpError(400, "parameter 'slice': " + std::to_string(slice) + " is outside the view's " +
                             std::to_string(l.view.slices) + " slice(s)");
  const auto& g = l.levels[level];
  if (x && *x >= g.cols)
    throw HttpError(400, "parameter 'x': level " + std::to_string(level) + " has " + std::to_string(g.cols) + " tile column(s)");
  if (y && *y >= g.rows)
    throw HttpError(400, "parameter 'y': level " + std::to_string(level) + " has " + std::to_string(g.rows) + " tile row(s)");
}

uint64_t required(const DeclaredQuery& q, const char* name) {
  const auto v = q.count(name);
  if (!v) throw HttpError(400, std::string("parameter '") + name + "' is required");
  return *v;
}

// GET /api/tiles/{ckpt}/{name}?level=&x=&y=[&slice=][&format=binary|json]
void get_tile(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  const DeclaredQuery query(req, tensor_tile_params());
  const TensorRef ref = find_tensor(state, req.matches[1], req.matches[2]);
  const uint64_t level = required(query, "level"), x = required(query, "x"), y = required(query, "y");
  const uint64_t slice = query.count("slice").value_or(0);
  const std::string format = query.choice("format").value_or("binary");
  std::unique_lock<std::mutex> lock(ref.checkpoint.mutex);
  const CheckpointIndex& index = *ref.checkpoint.index;
  const auto info = stored_pyramid(index, ref.tensor);
  check_position(info.layout, level, slice, x, y);
  const auto tile = index.load_tile(ref.tensor, info, static_cast<unsigned>(level), slice, y, x);
  lock.unlock();
  if (!tile) throw Error(ErrorKind::BadInput, "tile missing from the pyramid of " + ref.info().name);
  const TileRange r = info.layout.range(static_cast<unsigned>(level), y, x);
  if (format == "json") {
    nlohmann::json j = tile_json(info, ref.info(), static_cast<unsigned>(level), slice, x, y, *tile);
    j["checkpoint"] = ref.checkpoint.id;
    j["placement"] = nlohmann::json::array();  // read from the index: no op ran
    send_json(res, j);
    return;
  }
  const std::vector<uint8_t> record = encode_tile(*tile);
  res.set_content(std::string(record.begin(), record.end()), "application/octet-stream");
  res.set_header("X-Tensormorph-Tile-Bins", std::to_string(tile->hist.size()));
  res.set_header("X-Tensormorph-Tile-Rows", std::to_string(r.row_begin) + "," + std::to_string(r.row_end));
  res.set_header("X-Tensormorph-Tile-Cols", std::to_string(r.col_begin) + "," + std::to_string(r.col_end));
  res.set_header("Cache-Control", "no-store");
}

// Which cells a render or a cells request asks for: the overview, a whole level, or one tile's cells.
struct CellsQuery {
  std::optional<uint64_t> level, x, y;
  uint64_t slice = 0;
  CellStat stat = CellStat::Mean;
};

CellsQuery cells_query(const DeclaredQuery& query) {
  CellsQuery q;
  q.level = query.count("level"), q.x = query.count("x"), q.y = query.count("y");
  q.slice = query.count("slice").value_or(0);
  if (q.x.has_value() != q.y.has_value()) throw HttpError(400, std::string("parameter '") + (q.x ? "y" : "x") + "' is required with the other");
  if (q.x && !q.level) throw HttpError(400, "parameter 'level' is required with x and y");
  q.stat = parse_cell_stat(query.choice("stat").value_or("mean"));
  return q;
}

// The request for q's cells, checked against the tensor's layout (the stored one, else the default).
// The caller holds the checkpoint's mutex.
SourceRequest source_request(const TensorRef& ref, const CellsQuery& q) {
  SourceRequest sreq;
  sreq.slice = q.slice;
  if (q.level) sreq.level = static_cast<int>(*q.level);
  if (q.x) sreq.tile = std::make_pair(*q.x, *q.y);
  const auto info = ref.checkpoint.index->load_pyramid_info(ref.tensor);
  const PyramidLayout layout = info ? info->layout : make_pyramid_layout(default_view(ref.info().shape));
  check_position(layout, q.level.value_or(0), q.slice, q.x, q.y);
  return sreq;
}

// The cells of `q` (from the pyramid, or from the values through placed ops). The caller holds
// state.render_mutex (lock order: render_mutex, then the checkpoint's mutex).
CellSource compute_cells(const TensorRef& ref, const CellsQuery& q, const Planner& planner) {
  std::lock_guard<std::mutex> lock(ref.checkpoint.mutex);
  return cells_for(*ref.checkpoint.index, ref.tensor, planner, source_request(ref, q));
}

// GET /api/cells/{ckpt}/{name}?[level=&[x=&y=]][&slice=][&stat=] : the values a render would colour.
void get_cells(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  const CellsQuery q = cells_query(DeclaredQuery(req, tensor_cells_params()));
  const TensorRef ref = find_tensor(state, req.matches[1], req.matches[2]);
  const auto rt = state.compute.current();
  const Planner planner = rt->planner();
  CellSource src;
  {
    std::lock_guard<FifoMutex> compute_lock(state.render_mutex);
    src = compute_cells(ref, q, planner);
  }
  const std::vector<double> values = cell_values(src.grid, q.stat);
  std::string body(values.size() * sizeof(double), '\0');
  static_assert(std::endian::native == std::endian::little, "the cells body is little-endian float64");
  if (!values.empty()) std::memcpy(body.data(), values.data(), body.size());
  res.set_content(std::move(body), "application/octet-stream");
  const auto pair = [](uint64_t a, uint64_t b) { return std::to_string(a) + "," + std::to_string(b); };
  res.set_header("X-Tensormorph-Cells", pair(src.grid.rows, src.grid.cols));
  res.set_header("X-Tensormorph-Cell-Size", pair(src.grid.cell_rows, src.grid.cell_cols));
  res.set_header("X-Tensormorph-Tile-Rows", pair(src.region.row_begin, src.region.row_end));
  res.set_header("X-Tensormorph-Tile-Cols", pair(src.region.col_begin, src.region.col_end));
  res.set_header("X-Tensormorph-Source", src.source);
  res.set_header("X-Tensormorph-Stat", std::string(cell_stat_name(q.stat)));
  res.set_header("Cache-Control", "no-store");
}

// GET /api/render/{ckpt}/{name}.png?level=&x=&y=&slice=&stat=&transform=&colormap=&limits=&log_floor=&format=png|json
void get_render(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  const DeclaredQuery query(req, tensor_render_params());
  const CellsQuery q = cells_query(query);
  const std::string format = query.choice("format").value_or("png");
  TensorRenderRequest request;
  request.stat = q.stat;
  request.colormap = query.text("colormap").value_or("");
  if (!request.colormap.empty()) {
    try {
      tmorph::colormap(request.colormap);
    } catch (const Error& e) {
      throw HttpError(400, std::string("parameter 'colormap': ") + e.what());
    }
  }
  DisplayRequest& display = request.display;
  display.transform = parse_transform(query.choice("transform").value_or("linear"));
  if (const auto f = query.number("log_floor")) display.log_floor = *f;
  if (const auto limits = query.numbers("limits")) std::tie(display.lo, display.hi) = check_limits(Face::Http, (*limits)[0], (*limits)[1]);
  const TensorRef ref = find_tensor(state, req.matches[1], req.matches[2]);
  const CheckpointTensor& t = ref.info();

  const auto rt = state.compute.current();
  const Planner planner = rt->planner();
  // Cells from values (below the stored levels) and the colours both run placed ops: one render at a time.
  std::lock_guard<FifoMutex> compute_lock(state.render_mutex);
  TensorRender r;
  {
    std::lock_guard<std::mutex> lock(ref.checkpoint.mutex);
    request.source = source_request(ref, q);
    r = render_tensor(*ref.checkpoint.index, ref.tensor, planner, request);
  }
  nlohmann::json j = std::move(r.report);
  j["checkpoint"] = ref.checkpoint.id;
  if (format == "json") {
    send_json(res, j);
    return;
  }
  res.set_content(encode_png(r.image.image, tensor_render_text(r, t, q.slice), t.name), "image/png");
  res.set_header("X-Tensormorph-Placement", j["placement"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  res.set_header("X-Tensormorph-Limits", j["limits"].dump());
  res.set_header("Cache-Control", "no-store");
}

// GET /api/outliers/{ckpt}/{name}[?top=N][&nonfinite=M]: the largest-magnitude element of each of the N level-0
// tiles of largest abs max (default 8, at most 256) and up to M NaN and M Inf positions (default 16, at most 1024),
// from the pyramid, each resolved by reading its tile's values (outliers.h).
void get_outliers(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  const DeclaredQuery query(req, tensor_outliers_params());
  const uint64_t top = query.count("top").value_or(8);
  const uint64_t nonfinite = query.count("nonfinite").value_or(16);
  const TensorRef ref = find_tensor(state, req.matches[1], req.matches[2]);
  const auto rt = state.compute.current();
  const Planner planner = rt->planner();
  OutlierList list;
  {
    std::lock_guard<FifoMutex> compute_lock(state.render_mutex);  // tiles' values are read through placed ops
    std::lock_guard<std::mutex> lock(ref.checkpoint.mutex);
    list = find_outliers(*ref.checkpoint.index, ref.tensor, planner, static_cast<unsigned>(top), static_cast<unsigned>(nonfinite));
  }
  nlohmann::json j = outliers_json(list, ref.info());
  j["checkpoint"] = ref.checkpoint.id;
  send_json(res, j);
}

// GET /api/profile/{ckpt}/{name}?row=R|col=C[&slice=S]: every value of that row or column of the view as
// little-endian float64 (NaN and ±Inf as they are), with X-Tensormorph-Profile "row,R" or "col,C",
// X-Tensormorph-View "slices,rows,cols" and X-Tensormorph-Slice.
void get_profile(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  const DeclaredQuery query(req, tensor_profile_params());
  const auto row = query.count("row"), col = query.count("col");
  if (row.has_value() == col.has_value()) throw HttpError(400, "give exactly one of the parameters 'row' and 'col'");
  const uint64_t slice = query.count("slice").value_or(0);
  const TensorRef ref = find_tensor(state, req.matches[1], req.matches[2]);
  const auto rt = state.compute.current();
  const Planner planner = rt->planner();
  TensorProfile p;
  try {
    std::lock_guard<FifoMutex> compute_lock(state.render_mutex);  // dequantizing readers run placed ops
    std::lock_guard<std::mutex> lock(ref.checkpoint.mutex);
    p = tensor_profile(*ref.checkpoint.index, ref.tensor, planner, row ? ProfileAxis::Row : ProfileAxis::Column, row ? *row : *col, slice);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::InvalidArgument) throw;
    throw HttpError(400, std::string("parameter '") + (std::string_view(e.what()).starts_with("slice") ? "slice" : row ? "row" : "col") + "': " + e.what());
  }
  std::string body(p.values.size() * sizeof(double), '\0');
  static_assert(std::endian::native == std::endian::little, "the profile body is little-endian float64");
  if (!p.values.empty()) std::memcpy(body.data(), p.values.data(), body.size());
  res.set_content(std::move(body), "application/octet-stream");
  res.set_header("X-Tensormorph-Profile", std::string(row ? "row," : "col,") + std::to_string(p.index));
  res.set_header("X-Tensormorph-View", std::to_string(p.slices) + "," + std::to_string(p.rows) + "," + std::to_string(p.cols));
  res.set_header("X-Tensormorph-Slice", std::to_string(p.slice));
  res.set_header("Cache-Control", "no-store");
}

}  // namespace

void add_tile_routes(httplib::Server& svr, ServerState& state) {
  svr.Get(R"(/api/tiles/([^/]+)/(.+))",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_tile(state, req, res); }));
  svr.Get(R"(/api/profile/([^/]+)/(.+))",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_profile(state, req, res); }));
  svr.Get(R"(/api/outliers/([^/]+)/(.+))",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_outliers(state, req, res); }));
  svr.Get(R"(/api/cells/([^/]+)/(.+))",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_cells(state, req, res); }));
  svr.Get(R"(/api/render/([^/]+)/(.+)\.png)",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_render(state, req, res); }));
}

}  // namespace tmorph::server
