// GET /api/acquisitions/{id}/movie: the viewer's movie export, the file `tensormorph stem movie` writes for the
// same request (the same domain plan, stem/movie_plan.h, and application call, app/stem_movie.h): the diffraction
// patterns along a scan line, or a virtual image while one annulus radius sweeps, as GIF or MP4. The face parses
// the query, runs the movie under the render mutex into a temporary file, and sends its bytes.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "app/runtime.h"
#include "app/stem_movie.h"
#include "display/transform.h"
#include "ops/placement_json.h"
#include "server/http_util.h"
#include "server/routes.h"
#include "server/stem_request.h"
#include "tensormorph/error.h"

namespace tmorph::server {

namespace {

// The most frames one request may ask for: a movie is computed while the request waits.
constexpr uint64_t kMaxMovieFrames = 512;

// One end of along=R0,C0:R1,C1 (`whole`: the parameter's text, for the message).
ScanPoint position_param(const std::string& text, const std::string& whole) {
  const auto v = unsigned_list(text, 2, "along", "R0,C0:R1,C1 (unsigned integers)", whole);
  return {v[0], v[1]};
}

// The MovieRequest of the query: along=R0,C0:R1,C1 (patterns) or sweep=inner|outer&from=&to= (pixels), with
// steps, inner/outer (the fixed radius), center=R,C, radius, and the view's detector_bin.
MovieRequest movie_request(const httplib::Request& req) {
  MovieRequest r;
  view_params(req, r.base.load, false);
  if (const auto c = point_param(req, "center")) r.base.disk.center = *c;
  r.base.disk.radius = number_param(req, "radius");
  r.base.disk.radius_name = "radius";
  const auto steps = uint_param(req, "steps");
  if (steps && (*steps < 1 || *steps > kMaxMovieFrames))
    throw HttpError(400, "parameter 'steps': expected 1 to " + std::to_string(kMaxMovieFrames) + " frames, got " + std::to_string(*steps));
  const auto along = text_param(req, "along");
  const auto sweep = text_param(req, "sweep");
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
  if (*sweep != "inner" && *sweep != "outer") throw HttpError(400, "parameter 'sweep': expected inner or outer, got '" + *sweep + "'");
  const auto from = number_param(req, "from"), to = number_param(req, "to");
  if (!from || !to) throw HttpError(400, "sweep needs 'from' and 'to' (radii in pixels)");
  r.mode = *sweep == "inner" ? MovieMode::sweep_inner : MovieMode::sweep_outer;
  r.from = *from, r.to = *to;
  r.steps = steps.value_or(16);
  r.inner_px = number_param(req, "inner");
  r.outer_px = number_param(req, "outer");
  return r;
}

ProductDisplay display_params(const httplib::Request& req) {
  ProductDisplay d;
  d.colormap = text_param(req, "colormap").value_or("");
  if (const auto t = text_param(req, "transform")) d.transform = parse_transform(*t);
  d.lo = number_param(req, "lo");
  d.hi = number_param(req, "hi");
  return d;
}

// A file name no other request uses, in the system's temporary folder; removed when this goes out of scope.
struct TemporaryFile {
  std::filesystem::path path;
  explicit TemporaryFile(const std::string& extension) {
    static std::atomic<uint64_t> counter{0};
    std::ostringstream name;
    name << "tensormorph-movie-" << ::getpid() << "-" << counter++ << extension;
    path = std::filesystem::temp_directory_path() / name.str();
  }
  ~TemporaryFile() {
    std::error_code ignored;
    std::filesystem::remove(path, ignored);
  }
};

// GET /api/acquisitions/{id}/movie?along=R0,C0:R1,C1 | sweep=inner|outer&from=&to= [&steps=&inner=&outer=
//     &center=R,C&radius=&detector_bin=N&fps=&colormap=&transform=linear|log|signed-log&lo=&hi=&format=gif|mp4]
void get_movie(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  ServedAcquisition& served = find_acquisition(state, req.matches[1]);
  const std::string format = text_param(req, "format").value_or("gif");
  if (format != "gif" && format != "mp4") throw HttpError(400, "parameter 'format': expected gif or mp4, got '" + format + "'");
  const double fps = number_param(req, "fps").value_or(10);
  if (!(fps > 0 && fps <= 100)) throw HttpError(400, "parameter 'fps': expected a number in (0, 100]");
  MovieRequest request = movie_request(req);
  const ProductDisplay display = display_params(req);
  const Acquisition acq = reopen(served);
  require_complete(acq);
  const auto rt = state.compute.current();
  request.base.load.threads = rt->threads;
  request.base.load.memory_budget = rt->memory_budget;
  const MoviePlan plan = plan_movie(acq, request);
  const Planner planner = rt->planner();
  const TemporaryFile file("." + format);
  MovieResult movie;
  {
    std::lock_guard<FifoMutex> compute_lock(state.render_mutex);  // placed ops run one at a time
    movie = write_stem_movie(acq, plan, display, file.path.string(), fps, [&]() -> const Planner& { return planner; });
  }
  std::ifstream in(file.path, std::ios::binary);
  std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) throw Error(ErrorKind::Io, "movie: cannot read back " + file.path.string());
  res.set_header("Content-Disposition", "attachment; filename=\"" + served.id + "-" + plan.mode.substr(0, plan.mode.find(' ')) + "." + format + "\"");
  res.set_header("X-Movie-Frames", std::to_string(plan.frames.size()));
  res.set_content(std::move(body), format == "gif" ? "image/gif" : "video/mp4");
}

}  // namespace

void add_stem_movie_routes(httplib::Server& svr, ServerState& state) {
  svr.Get(R"(/api/acquisitions/([^/]+)/movie)",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_movie(state, req, res); }));
}

}  // namespace tmorph::server
