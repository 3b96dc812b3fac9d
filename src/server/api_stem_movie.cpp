// GET /api/acquisitions/{id}/movie: the viewer's movie export, the file `tensormorph stem movie` writes for the
// same request (the same domain plan, stem/products/movie_plan.h, and STEM call, stem/images/stem_movie.h): the diffraction
// patterns along a scan line, or a virtual image while one annulus radius sweeps, as GIF or MP4. The face parses
// the query, runs the movie under the render mutex into memory (the writers' memory target: the bytes a file would
// hold, no scratch file), and sends them.
#include "app/runtime.h"
#include "stem/images/stem_movie.h"
#include "display/transform.h"
#include "ops/placement_json.h"
#include "server/http_util.h"
#include "server/routes.h"
#include "server/stem_request.h"
#include "stem/runs/request_params.h"
#include "tensormorph/error.h"

namespace tmorph::server {

namespace {

// One end of along=R0,C0:R1,C1 (`whole`: the parameter's text, for the message).
ScanPoint position_param(const std::string& text, const std::string& whole) {
  const auto v = unsigned_list(text, 2, "along", "R0,C0:R1,C1 (unsigned integers)", whole);
  return {v[0], v[1]};
}

// The MovieRequest of the query: along=R0,C0:R1,C1 (patterns) or sweep=inner|outer&from=&to= (pixels), with
// steps, inner/outer (the fixed radius), center=R,C, radius, and the view's detector_bin.
MovieRequest movie_request(const DeclaredQuery& q) {
  MovieRequest r;
  view_params(q, r.base.load, false);
  r.base.disk = disk_params(q);
  const auto steps = q.count("steps");  // 1 to 512 (declared): a movie is computed while the request waits
  const auto along = q.text("along");
  const auto sweep = q.choice("sweep");
  if (along.has_value() == sweep.has_value()) throw HttpError(400, "give one of along=R0,C0:R1,C1 (patterns) or sweep=inner|outer (virtual images)");
  if (along) {
    const size_t colon = along->find(':');
    if (colon == std::string::npos) throw HttpError(400, "parameter 'along': expected R0,C0:R1,C1, got '" + *along + "'");
    r.mode = MovieMode::patterns_along;
    r.from_position = position_param(along->substr(0, colon), *along);
    r.to_position = position_param(along->substr(colon + 1), *along);
    r.steps = steps.value_or(0);
    return r;
  }
  const auto from = q.number("from"), to = q.number("to");
  if (!from || !to) throw HttpError(400, "sweep needs 'from' and 'to' (radii in pixels)");
  r.mode = *sweep == "inner" ? MovieMode::sweep_inner : MovieMode::sweep_outer;
  r.from = *from, r.to = *to;
  r.steps = steps.value_or(16);
  r.inner_px = q.number("inner");
  r.outer_px = q.number("outer");
  return r;
}

ProductDisplay display_params(const DeclaredQuery& q) {
  ProductDisplay d;
  d.colormap = q.text("colormap").value_or("");
  if (const auto t = q.choice("transform")) d.transform = parse_transform(*t);
  d.lo = q.number("lo");
  d.hi = q.number("hi");
  return d;
}

// GET /api/acquisitions/{id}/movie?along=R0,C0:R1,C1 | sweep=inner|outer&from=&to= [&steps=&inner=&outer=
//     &center=R,C&radius=&detector_bin=N&fps=&colormap=&transform=linear|log|signed-log&lo=&hi=&format=gif|mp4]
void get_movie(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  ServedAcquisition& served = find_acquisition(state, req.matches[1]);
  const DeclaredQuery q(req, movie_params());
  const std::string format = q.choice("format").value_or("gif");
  const double fps = q.number("fps").value_or(10);
  MovieRequest request = movie_request(q);
  check_movie_request(request, fps, Face::Http);
  const ProductDisplay display = display_params(q);
  const Acquisition acq = reopen(served);
  require_complete(acq);
  const auto rt = state.compute.current();
  request.base.load.threads = rt->threads;
  request.base.load.memory_budget = rt->memory_budget;
  ProgressScope tracked(track_load(state, q, request.base.load));  // progress_id: each pass's frames; DELETE cancels
  const MoviePlan plan = plan_movie(acq, request);
  const Planner planner = rt->planner();
  const MovieTarget target = MovieTarget::memory(format == "mp4" ? MovieFormat::mp4 : MovieFormat::gif, "movie of " + served.id);
  MovieResult movie = run_tracked(state, tracked.get(), [&] {
    return write_stem_movie(acq, plan, display, target, fps, false, [&]() -> const Planner& { return planner; }, rt->plugin_dir);
  });
  tracked.done();
  res.set_header("Content-Disposition", "attachment; filename=\"" + served.id + "-" + plan.mode.substr(0, plan.mode.find(' ')) + "." + format + "\"");
  res.set_header("X-Movie-Frames", std::to_string(plan.frames.size()));
  res.set_content(std::move(movie.bytes), format == "gif" ? "image/gif" : "video/mp4");
}

}  // namespace

void add_stem_movie_routes(httplib::Server& svr, ServerState& state) {
  svr.Get(R"(/api/acquisitions/([^/]+)/movie)",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_movie(state, req, res); }));
}

}  // namespace tmorph::server
