// tensormorph stem movie PATH -o OUT.gif|OUT.mp4: the diffraction patterns along a scan line
// (--patterns-along R0,C0:R1,C1) or a virtual image while one annulus radius sweeps (--sweep inner|outer
// --from A --to B --steps N), each frame as `stem mean-dp|mask -o OUT.png` draws it, captioned with a label
// and a scale bar. The frames come from the domain (stem/products/movie_plan.h) and the movie from the STEM images
// (stem/images/stem_movie.h); this file parses, calls and prints.
#include <cmath>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "stem/images/stem_movie.h"
#include "cli/output.h"
#include "cli/declared_flags.h"
#include "cli/product_output.h"
#include "cli/stem_args.h"
#include "ops/placement_json.h"
#include "stem/runs/request_params.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

struct MovieArgs {
  LoadArgs load;
  std::string patterns_along, sweep, center;
  double from = NAN, to = NAN, inner = NAN, outer = NAN, radius = NAN, mrad_per_px = NAN, semiangle_mrad = NAN, fps = 10;
  int64_t steps = 0;
  bool shared_limits = false;
  CLI::Option* steps_option = nullptr;
  ProductDisplayFlags display;
};

ScanPoint parse_position(const std::string& text) {
  const auto v = parse_list(text, 2, "--patterns-along");
  return {v[0], v[1]};
}

MovieRequest movie_request(const MovieArgs& a, const Runtime& rt) {
  MovieRequest r;
  r.base.load = make_request(a.load, rt);
  r.base.disk = disk_request(a.center, a.radius);
  r.base.angle_per_pixel = {given(a.mrad_per_px), "--detector-mrad-per-px"};
  r.base.semiangle_mrad = {given(a.semiangle_mrad), "--semiangle-mrad"};
  const bool steps_given = a.steps_option->count() > 0;
  if (steps_given && a.steps < 1) throw Error(ErrorKind::InvalidArgument, "--steps " + std::to_string(a.steps) + ": at least 1 frame");
  if (a.patterns_along.empty() == a.sweep.empty())
    throw Error(ErrorKind::InvalidArgument, "stem movie: give one of --patterns-along R0,C0:R1,C1 or --sweep inner|outer");
  if (!a.patterns_along.empty()) {
    const size_t colon = a.patterns_along.find(':');
    if (colon == std::string::npos)
      throw Error(ErrorKind::InvalidArgument, "--patterns-along " + a.patterns_along + ": expected R0,C0:R1,C1");
    r.mode = MovieMode::patterns_along;
    r.from_position = parse_position(a.patterns_along.substr(0, colon));
    r.to_position = parse_position(a.patterns_along.substr(colon + 1));
    r.steps = steps_given ? static_cast<uint64_t>(a.steps) : 0;
    return r;
  }
  if (a.sweep != "inner" && a.sweep != "outer") throw Error(ErrorKind::InvalidArgument, "--sweep " + a.sweep + ": expected inner or outer");
  if (std::isnan(a.from) || std::isnan(a.to)) throw Error(ErrorKind::InvalidArgument, "--sweep needs --from and --to (pixels)");
  r.mode = a.sweep == "inner" ? MovieMode::sweep_inner : MovieMode::sweep_outer;
  r.from = a.from, r.to = a.to;
  r.steps = steps_given ? static_cast<uint64_t>(a.steps) : 16;
  r.inner_px = given(a.inner), r.outer_px = given(a.outer);
  return r;
}

void run_movie(const MovieArgs& a) {
  movie_format(a.load.out);  // an unknown extension fails before anything is read
  const ProductDisplay display = a.display.display();
  const auto rt = command_runtime(&a.load.compute);
  const Acquisition acq = open_acquisition(a.load.path);
  const MovieRequest request = movie_request(a, *rt);
  check_movie_request(request, a.fps, Face::Cli);
  const MoviePlan plan = plan_movie(acq, request);
  const Planner planner = rt->planner();
  MovieResult movie =
      write_stem_movie(acq, plan, display, MovieTarget::file(a.load.out), a.fps, a.shared_limits, [&]() -> const Planner& { return planner; },
                       rt->plugin_dir);
  movie.report["placement"] = placements_json(movie.placements);
  if (!acq.problems.empty()) movie.report["acquisition_problems"] = acq.problems_report();
  if (a.load.json) {
    print_json(movie.report);
    refuse_if_values_changed(acq, a.load.out);
    return;
  }
  const nlohmann::json& r = movie.report;
  print_rows({{"wrote", a.load.out + " (" + r["codec"].get<std::string>() + ")"},
              {"frames", std::to_string(r["frames"].get<uint64_t>()) + " (" + plan.mode + "), " + fmt(a.fps) + " fps"},
              {"size", std::to_string(r["width"].get<uint32_t>()) + " x " + std::to_string(r["height"].get<uint32_t>()) + " px"},
              {"first", r["labels"].front().get<std::string>()},
              {"last", r["labels"].back().get<std::string>()},
              {"scale bar", plan.unit == "px" ? "pixels (no calibration)" : fmt(plan.units_per_pixel) + " " + plan.unit + " per pixel"},
              {"time", fmt(r["seconds"].get<double>()) + " s"}},
             0);
  refuse_if_values_changed(acq, a.load.out);
}

}  // namespace

void add_stem_movie_command(CLI::App* stem) {
  auto a = std::make_shared<MovieArgs>();
  CLI::App* cmd = stem->add_subcommand("movie", "a GIF or MP4 of the diffraction patterns along a scan line, or of a virtual image "
                                                "while a detector radius sweeps, with colour map, scale bar and frame labels");
  add_load_flags(cmd, a->load, true);
  cmd->add_option("-o,--out", a->load.out, "OUT.gif (exact colours) or OUT.mp4 (H.264)")->required();
  cmd->add_option("--patterns-along", a->patterns_along, "R0,C0:R1,C1: the patterns at the scan positions on this line (both ends included)");
  cmd->add_option("--sweep", a->sweep, "inner or outer: the annulus radius that sweeps (virtual images)");
  cmd->add_option("--from", a->from, "--sweep: first radius (pixels)");
  cmd->add_option("--to", a->to, "--sweep: last radius (pixels)");
  a->steps_option = cmd->add_option("--steps", a->steps, "frames (default: every position on the line; 16 for a sweep)");
  cmd->add_option("--inner", a->inner, "--sweep outer: the fixed inner radius (pixels)");
  cmd->add_option("--outer", a->outer, "--sweep inner: the fixed outer radius (pixels; default none)");
  cmd->add_option("--fps", a->fps, "frames per second (default 10)");
  cmd->add_option("--center", a->center, "R,C: the disk centre in detector pixels (default: detected)");
  cmd->add_option("--radius", a->radius, "the bright-field disk radius in pixels (default: detected)");
  cmd->add_option("--detector-mrad-per-px", a->mrad_per_px, "patterns: detector angle per unbinned pixel for the scale bar "
                                                            "(default: the file's, else semi-angle / --radius, else pixels)");
  cmd->add_option("--semiangle-mrad", a->semiangle_mrad, "probe convergence semi-angle (default: the file's)");
  a->display.add_to(cmd);
  cmd->add_flag("--shared-limits", a->shared_limits, "one range for every frame: the union of the frames' automatic limits "
                                                      "(default: each frame its own, as its PNG)");
  validate_declared_flags(cmd, movie_params(), {"--detector-bin"});
  cmd->callback([a] { run_movie(*a); });
}

}  // namespace tmorph::cli
