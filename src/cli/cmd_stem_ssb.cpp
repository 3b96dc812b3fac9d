// tensormorph stem ssb PATH -o phase.npy|phase.png: single-sideband ptychography (src/stem/ssb.h) with given
// aberrations (preview) or fitted ones (--fit: src/stem/ssb_fit.h), the calibration read from the file or
// given, each value's source reported.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/output.h"
#include "cli/product_output.h"
#include "cli/compute_flags.h"
#include "cli/stem_args.h"
#include "ops/placement_json.h"
#include "stem/dpc.h"
#include "stem/products.h"
#include "stem/simulate.h"
#include "stem/ssb.h"
#include "stem/ssb_fit.h"
#include "stem/ssb_setup.h"
#include "stem/virtual_detector.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

struct SsbArgs {
  LoadArgs load;
  ProductDisplayFlags display;
  std::string center;
  double radius = NAN, kv = NAN, semiangle_mrad = NAN, scan_step_A = NAN, mrad_per_px = NAN, rotation_deg = NAN;
  double C10 = 0, C12 = 0, phi12 = 0;
  bool fit = false;
  unsigned trials = 200;
  uint64_t seed = 0;
  std::string c10_range, c12_range, phi12_range;
  std::vector<std::string> higher;  // --aberration NAME=VALUE[,ANGLE]
};

// --aberration C30=2e5 or C23=100,30: a higher-order coefficient in Å (Krivanek notation) and its azimuth in
// degrees (m > 0 only).
Aberrations with_higher_orders(Aberrations ab, const std::vector<std::string>& specs) {
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    try {
      const std::string name = spec.substr(0, eq), rest = eq == std::string::npos ? "" : spec.substr(eq + 1);
      Aberrations name_check;
      set_higher_order(name_check, name, 0, 0);  // an unknown name: the error lists the valid ones
      if (eq == std::string::npos) throw Error(ErrorKind::InvalidArgument, "no value");
      const auto [value, angle] = parse_limits(rest.find(',') != std::string::npos ? rest : rest + ",0", "--aberration " + name);
      set_higher_order(ab, name, value, angle);
    } catch (const Error& e) {
      throw Error(e.kind(), "--aberration " + spec + ": " + e.what() + " (expected NAME=VALUE[,ANGLE]; C10, C12: --C10, --C12)");
    }
  }
  return ab;
}

// The fit's search box and budget from the flags (ssb_fit.h's defaults where not given).
SsbFitOptions fit_options(const SsbArgs& a) {
  SsbFitOptions o;
  if (!a.c10_range.empty()) std::tie(o.c10_low_nm, o.c10_high_nm) = parse_limits(a.c10_range, "--c10-range-nm");
  if (!a.c12_range.empty()) std::tie(o.c12_low_nm, o.c12_high_nm) = parse_limits(a.c12_range, "--c12-range-nm");
  if (!a.phi12_range.empty()) std::tie(o.phi12_low_deg, o.phi12_high_deg) = parse_limits(a.phi12_range, "--phi12-range-deg");
  if (!(o.c10_low_nm < o.c10_high_nm) || !(o.c12_low_nm < o.c12_high_nm) || o.c12_low_nm < 0 || !(o.phi12_low_deg < o.phi12_high_deg))
    throw Error(ErrorKind::InvalidArgument, "stem ssb --fit: each search range needs LO < HI (and C12 >= 0)");
  if (a.trials == 0) throw Error(ErrorKind::InvalidArgument, "stem ssb --fit: --trials must be at least 1");
  o.fixed = with_higher_orders({}, a.higher);
  o.tpe.trials = a.trials;
  o.tpe.seed = a.seed;
  return o;
}

// The approximation SSB may take with the caller's consent when G does not fit the memory budget.
constexpr const char* kBinStep = "ssb.bin_detector";

// One reconstruction with these flags; `approximation` (null, or what was consented to) goes into the report.
void run_ssb_once(const SsbArgs& a, const nlohmann::json& approximation) {
  const auto t_start = std::chrono::steady_clock::now();
  const std::optional<SsbFitOptions> fit_opts = a.fit ? std::optional<SsbFitOptions>(fit_options(a)) : std::nullopt;
  const auto rt = make_runtime(&a.load.compute);
  const Planner planner = rt->planner();
  const Acquisition acq = open_acquisition(a.load.path);
  const LoadRequest load = make_request(a.load, *rt);
  const LoadPlan plan = plan_load(acq, load);
  const uint64_t scan_rows = plan.output_shape[0], scan_cols = plan.output_shape[1];
  const uint64_t det_rows = plan.output_shape[2], det_cols = plan.output_shape[3];
  nlohmann::json report = {{"product", "ssb"}, {"file", a.load.out}};
  std::vector<Placement> placements;

  // Disk, calibration and angular pixel size: the domain's rules (the products resolve theirs the same way).
  SsbSetupRequest request;
  request.disk = {parse_point(a.center, "--center"), given(a.radius)};
  request.energy_ev = {std::isnan(a.kv) ? std::nullopt : std::optional<double>(a.kv * 1e3), "--kv"};
  request.semiangle_mrad = {given(a.semiangle_mrad), "--semiangle-mrad"};
  request.scan_step_A = {given(a.scan_step_A), "--scan-step-A"};
  request.detector_mrad_per_px = {given(a.mrad_per_px), "--detector-mrad-per-px"};
  const SsbSetup setup = resolve_ssb_setup(acq, load, request, planner, &placements);
  report["disk"] = to_json(setup.geometry.disk);
  const BrightFieldDisk& disk = setup.geometry.disk.disk;
  const Aberrations given_ab = with_higher_orders({a.C10, a.C12, a.phi12}, a.higher);
  StemLoader loader(acq, load);
  SsbFrames frames = ssb_frames_from_loader(loader);
  frames.excluded_pixels = setup.excluded_pixels;
  // G once (the frames are read a single time); every rotation candidate and fit trial reuses it.
  const SsbProblem problem(frames, scan_rows, scan_cols, det_rows, det_cols, setup.calibration(0), rt->threads, rt->memory_budget, planner);
  double fit_seconds = 0, reconstruct_seconds = 0;
  struct Solution {
    Aberrations ab;
    std::optional<SsbFit> fit;
    double loss = 0;
    std::optional<SsbResult> images;  // the preview's reconstruction (a fit reconstructs once at the end)
  };
  // For one scan rotation: the given aberrations, or the fit's.
  const auto solve = [&](double rotation) {
    Solution s{given_ab, std::nullopt, 0, std::nullopt};
    if (fit_opts) {
      s.fit = ssb_fit_aberrations(problem, rotation, *fit_opts);
      fit_seconds += s.fit->seconds;
      s.ab = s.fit->fitted, s.loss = s.fit->loss;
    } else {
      s.images = problem.evaluate(given_ab, rotation);
      reconstruct_seconds += s.images->seconds;
      s.loss = s.images->loss;
    }
    return s;
  };

  // Scan rotation: given; or from the DPC rotation, its 180-degree ambiguity settled by the lower SSB loss
  // (after fitting each, with --fit): choose_ssb_scan_rotation.
  Solution chosen;
  Sourced rotation;
  if (!std::isnan(a.rotation_deg)) {
    rotation = {a.rotation_deg, "degree", "--scan-rotation-deg", ""};
    chosen = solve(rotation.value);
  } else {
    ProductRequest sums;
    sums.load = load;
    const ProductResult r = compute_products(acq, sums, planner);
    placements.insert(placements.end(), r.placements.begin(), r.placements.end());
    std::vector<Solution> solved;
    const SsbRotationSearch search = choose_ssb_scan_rotation(find_dpc_rotation(center_of_mass(r)), [&](double candidate) {
      solved.push_back(solve(candidate));
      return solved.back().loss;
    });
    report["rotation_search"] = to_json(search);
    rotation = search.rotation;
    chosen = std::move(solved.at(static_cast<size_t>(search.chosen)));
  }
  if (!chosen.images) {
    chosen.images = problem.evaluate(chosen.ab, rotation.value);
    reconstruct_seconds += chosen.images->seconds;
  }
  const SsbResult& result = *chosen.images;
  const Aberrations& ab = chosen.ab;
  placements.push_back(result.placement);  // the per-pixel work (every evaluation ran where this one did)

  const std::vector<uint64_t> shape = {result.rows, result.cols};
  if (is_png(a.load.out)) write_product_png(a.load.out, "ssb", shape, result.phase, a.display, planner, report, placements);
  else write_product_npy(a.load.out, "<f8", shape, result.phase.data(), result.phase.size() * sizeof(double));
  report["shape"] = shape;
  report["aberrations"] = to_json(ab);
  report["aberrations_unit"] = {{"C10", "angstrom"}, {"C12", "angstrom"}, {"phi12", "degree"}};
  report["aberrations_source"] = chosen.fit ? "fitted (TPE search, then Nelder-Mead)" : "given (preview; no fit)";
  if (chosen.fit) {
    const SsbFit& f = *chosen.fit;
    report["fit"] = {{"trials", f.trials},
                     {"seed", fit_opts->tpe.seed},
                     {"search_space", {{"C10_nm", {fit_opts->c10_low_nm, fit_opts->c10_high_nm}},
                                       {"C12_nm", {fit_opts->c12_low_nm, fit_opts->c12_high_nm}},
                                       {"phi12_deg", {fit_opts->phi12_low_deg, fit_opts->phi12_high_deg}}}},
                     {"tpe_best", to_json(f.tpe_best)},
                     {"tpe_best_loss", f.tpe_best_loss},
                     {"nelder_mead", {{"iterations", f.simplex_iterations}, {"evaluations", f.simplex_evaluations},
                                      {"converged", f.simplex_converged}}},
                     {"evaluations", f.evaluations},
                     {"seconds", f.seconds}};
  }
  report["calibration"] = ssb_calibration_json(setup, rotation);
  report["loss"] = result.loss;
  report["bright_field_pixels"] = result.bf_pixels;
  report["memory_bytes"] = result.memory_bytes;
  report["seconds"] = problem.prepare_seconds() + fit_seconds + reconstruct_seconds;  // reading G, fitting, reconstructing
  report["timings"] = {{"prepare_s", problem.prepare_seconds()},
                       {"fit_s", fit_seconds},
                       {"reconstruct_s", reconstruct_seconds},
                       {"total_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count()}};
  report["provenance"] = loader.provenance();
  report["placement"] = placements_json(placements);
  report["approximation"] = approximation;
  std::ofstream(a.load.out + ".json", std::ios::trunc) << report.dump(2) << "\n";
  if (a.load.json) {
    std::cout << report.dump(2) << "\n";
    return;
  }
  print_rows({{"product", "ssb phase"},
              {"wrote", a.load.out + " " + nlohmann::json(shape).dump() + " and " + a.load.out + ".json"},
              {"aberrations", "C10 " + fmt(ab.C10_A) + " A, C12 " + fmt(ab.C12_A) + " A, phi12 " + fmt(ab.phi12_deg) + " deg (" +
                                  (chosen.fit ? "fitted: " + std::to_string(chosen.fit->evaluations) + " evaluations in " +
                                                    fmt(fit_seconds) + " s" : std::string("given")) + ")"},
              {"scan rotation", fmt(rotation.value) + " deg (" + rotation.source + ")"},
              {"bright field", std::to_string(result.bf_pixels) + " pixels, disk radius " + fmt(disk.radius) + " px"},
              {"loss", fmt(result.loss)},
              {"approximation", approximation.is_null() ? std::string("none")
                                                        : "detector binned by " + approximation["detector_bin"].dump() +
                                                              " (consented: --allow-approx " + kBinStep + ")"},
              {"time", fmt(problem.prepare_seconds()) + " s reading G, " + fmt(fit_seconds) + " s fitting, " +
                           fmt(reconstruct_seconds) + " s reconstructing"}},
             0);
  print_placements(placements);
}

// Runs SSB; when G does not fit the memory budget the refusal names the ladder, and with
// --allow-approx ssb.bin_detector the detector is binned by the smallest power of two (times any bin asked
// for) that fits, reported under "approximation".
void run_ssb(const SsbArgs& a) {
  const auto& consents = a.load.compute.allow_approx;
  const bool may_bin = std::find(consents.begin(), consents.end(), kBinStep) != consents.end();
  try {
    run_ssb_once(a, nullptr);
    return;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::PrecisionRefused) throw;
    if (!may_bin)
      throw Error(ErrorKind::PrecisionRefused, std::string(e.what()) + " Or consent to binning the detector by the smallest factor "
                                               "that fits: --allow-approx " + kBinStep + ".");
    const std::array<uint64_t, 2> asked = parse_bin(a.load.detector_bin, "--detector-bin");
    for (uint64_t factor = 2; factor <= 64; factor *= 2) {
      SsbArgs binned = a;
      binned.load.detector_bin = std::to_string(asked[0] * factor) + "," + std::to_string(asked[1] * factor);
      // A given disk is in unbinned pixels: expressed in the binned detector's.
      const DiskRequest disk = tmorph::binned(DiskRequest{parse_point(a.center, "--center"), given(a.radius)}, factor);
      if (disk.center) binned.center = std::to_string((*disk.center)[0]) + "," + std::to_string((*disk.center)[1]);
      if (disk.radius) binned.radius = *disk.radius;
      const nlohmann::json approximation = {{"step", kBinStep},
                                            {"detector_bin", {asked[0] * factor, asked[1] * factor}},
                                            {"refused_without", e.what()}};
      try {
        run_ssb_once(binned, approximation);
        return;
      } catch (const Error& again) {
        if (again.kind() != ErrorKind::PrecisionRefused) throw;
      }
    }
    throw Error(ErrorKind::PrecisionRefused, std::string(e.what()) + " (--allow-approx " + kBinStep +
                                             ": no detector bin up to 64 fits either)");
  }
}

}  // namespace

void add_stem_ssb_command(CLI::App* stem) {
  auto a = std::make_shared<SsbArgs>();
  CLI::App* cmd = stem->add_subcommand("ssb", "single-sideband ptychography: the specimen's phase from the bright-field "
                                              "disk, with given aberrations (preview) or fitted ones (--fit)");
  add_load_flags(cmd, a->load, true);
  cmd->add_option("-o,--out", a->load.out, "output .npy (phase, radians) or .png; OUT.json beside it")->required();
  a->display.add_to(cmd);
  cmd->add_option("--C10", a->C10, "defocus C10 in angstrom (positive: as the simulator's defocus)");
  cmd->add_option("--C12", a->C12, "two-fold astigmatism C12 in angstrom");
  cmd->add_option("--phi12", a->phi12, "astigmatism azimuth in degrees, from +column towards +row");
  cmd->add_option("--aberration", a->higher,
                  "NAME=VALUE[,ANGLE]: a higher-order aberration in angstrom (Krivanek: C21 C23 C30 C32 C34 C41 C43 C45 C50 "
                  "C52 C54 C56) and its azimuth in degrees; repeatable; held fixed by --fit");
  cmd->add_flag("--fit", a->fit, "fit C10, C12, phi12: a seeded TPE search, then Nelder-Mead (ignores --C10/--C12/--phi12)");
  cmd->add_option("--trials", a->trials, "TPE trials (default 200)");
  cmd->add_option("--seed", a->seed, "TPE seed (default 0): the same seed gives byte-identical fitted values");
  cmd->add_option("--c10-range-nm", a->c10_range, "LO,HI: the C10 search range in nm (default -400,400)");
  cmd->add_option("--c12-range-nm", a->c12_range, "LO,HI: the C12 search range in nm (default 0,100)");
  cmd->add_option("--phi12-range-deg", a->phi12_range, "LO,HI: the phi12 search range in degrees (default -90,90)");
  cmd->add_option("--kv", a->kv, "accelerating voltage in kV (default: the file's beam energy)");
  cmd->add_option("--semiangle-mrad", a->semiangle_mrad, "probe convergence semi-angle (default: the file's)");
  cmd->add_option("--scan-step-A", a->scan_step_A, "scan step in angstrom (default: the file's */scan_step)");
  cmd->add_option("--detector-mrad-per-px", a->mrad_per_px,
                  "detector angle per pixel (default: the file's, else semi-angle / disk radius)");
  cmd->add_option("--scan-rotation-deg", a->rotation_deg, "scan rotation (default: from the DPC rotation and the SSB loss)");
  cmd->add_option("--center", a->center, "R,C: the bright-field disk centre in pixels, fractional allowed (default: detected)");
  cmd->add_option("--radius", a->radius, "the bright-field disk radius in pixels (default: detected)");
  cmd->callback([a] { run_ssb(*a); });
}

}  // namespace tmorph::cli
