// tensormorph stem ssb PATH -o phase.npy|phase.png: single-sideband ptychography with given aberrations
// (preview) or fitted ones (--fit), the calibration read from the file or given, each value's source
// reported. The science is the domain's (src/stem/runs/ssb_run.h); this file parses, calls, writes and prints.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include <filesystem>

#include "cli/compute_flags.h"
#include "cli/declared_flags.h"
#include "cli/output.h"
#include "cli/product_output.h"
#include "cli/ranks.h"
#include "cli/progress_line.h"
#include "cli/stem_args.h"
#include "ops/placement_json.h"
#include "stem/runs/request_params.h"
#include "stem/ssb/ssb_fit.h"
#include "stem/runs/ssb_run.h"
#include "stem/ssb/ssb_setup.h"
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
  std::string search = "estimate";
  unsigned estimate_trials = 40;
  uint64_t fit_crop = kSsbFitCrop;
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
  if (a.search != "estimate" && a.search != "wide")
    throw Error(ErrorKind::InvalidArgument, "stem ssb --search: expected estimate or wide, have " + a.search);
  // A range given is the user's box: searched whole (the estimate is still reported).
  const bool box_given = !a.c10_range.empty() || !a.c12_range.empty() || !a.phi12_range.empty();
  o.search = a.search == "wide" || box_given ? SsbSearch::Wide : SsbSearch::Estimate;
  if (a.estimate_trials == 0) throw Error(ErrorKind::InvalidArgument, "stem ssb --fit: --estimate-trials must be at least 1");
  o.estimate_trials = a.estimate_trials;
  o.fixed = with_higher_orders({}, a.higher);
  o.tpe.trials = a.trials;
  o.tpe.seed = a.seed;
  return o;
}

// Parses the flags into the domain's request, runs it (stem/runs/ssb_run.h: set-up, rotation, fit, and the
// detector-binning approximation with consent), writes the phase and its report, prints.
void run_ssb(const SsbArgs& a) {
  if (serve_as_other_rank(a.load.compute)) return;  // under mpirun: ranks > 0 read the bands rank 0 sends
  const auto t_start = std::chrono::steady_clock::now();
  SsbRunRequest request;
  request.fit = a.fit ? std::optional<SsbFitOptions>(fit_options(a)) : std::nullopt;
  const auto rt = command_runtime(&a.load.compute);
  const Planner planner = rt->planner();
  const Acquisition acq = open_acquisition(a.load.path);
  request.load = make_request(a.load, *rt);
  request.setup.disk = disk_request(a.center, a.radius);
  request.setup.energy_ev = {std::isnan(a.kv) ? std::nullopt : std::optional<double>(a.kv * 1e3), "--kv"};
  request.setup.semiangle_mrad = {given(a.semiangle_mrad), "--semiangle-mrad"};
  request.setup.scan_step_A = {given(a.scan_step_A), "--scan-step-A"};
  request.setup.detector_mrad_per_px = {given(a.mrad_per_px), "--detector-mrad-per-px"};
  request.given = with_higher_orders({a.C10, a.C12, a.phi12}, a.higher);
  request.scan_rotation_deg = given(a.rotation_deg);
  request.scan_rotation_source = "--scan-rotation-deg";
  request.fit_crop = a.fit_crop;
  check_ssb_request(request, Face::Cli);
  const auto& consents = a.load.compute.allow_approx;
  const bool may_bin = std::find(consents.begin(), consents.end(), kSsbBinDetectorStep) != consents.end();
  FitProgressLine fit_line(a.load.json);
  if (request.fit) request.fit->progress = fit_line.callback();
  const SsbRun run = run_ssb_with_consent(acq, request, planner, may_bin);
  fit_line.finish();

  const SsbResult& result = run.result;
  const Aberrations& ab = run.aberrations;
  std::vector<Placement> placements = run.placements;
  nlohmann::json report = to_json(run);
  report["product"] = "ssb";
  report["file"] = a.load.out;
  if (!acq.problems.empty()) report["acquisition_problems"] = acq.problems_report();
  const std::vector<uint64_t> shape = {result.rows, result.cols};
  switch (output_format(a.load.out, kProductOutputs)) {
    case OutputFormat::png:
      write_product_png(a.load.out, "ssb", shape, result.phase, a.display, planner, report, placements,
                        {"SSB PHASE OF " + std::filesystem::path(a.load.path).filename().string(), "PHASE (RAD)", ProductFigure::Grid::scan, &run.setup.scan_step_A});
      break;
    case OutputFormat::tiff:
      report["tiff"] = write_product_tiff(a.load.out, "ssb", "<f8", shape, result.phase.data(), &run.setup.scan_step_A);
      break;
    default: write_product_npy(a.load.out, "<f8", shape, result.phase.data(), result.phase.size() * sizeof(double));
  }
  report["timings"]["total_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  report["placement"] = placements_json(placements);
  std::ofstream(a.load.out + ".json", std::ios::trunc) << json_text(report) << "\n";
  if (a.load.json) {
    print_json(report);
    refuse_if_values_changed(acq, a.load.out);
    return;
  }
  print_rows({{"product", "ssb phase"},
              {"wrote", a.load.out + " " + nlohmann::json(shape).dump() + " and " + a.load.out + ".json"},
              {"aberrations", "C10 " + fmt(ab.C10_A) + " A, C12 " + fmt(ab.C12_A) + " A, phi12 " + fmt(ab.phi12_deg) + " deg (" +
                                  (run.fit ? "fitted, " + run.fit->search + ": " + std::to_string(run.fit->evaluations) +
                                                 " evaluations in " + fmt(run.fit_seconds) + " s; branch " +
                                                 (run.branch->conjugate ? "conjugate" : "as fitted") + ", phase skewness " +
                                                 fmt(run.branch->skewness[run.branch->conjugate ? 1 : 0])
                                           : std::string("given")) + ")"},
              {"scan rotation", fmt(run.rotation.value) + " deg (" + run.rotation.source + ")"},
              {"bright field", std::to_string(result.bf_pixels) + " pixels, disk radius " + fmt(run.setup.geometry.disk.disk.radius) + " px"},
              {"loss", fmt(result.loss)},
              {"approximation", run.approximation.is_null() ? std::string("none")
                                                            : "detector binned by " + run.approximation["detector_bin"].dump() +
                                                                  " (consented: --allow-approx " + kSsbBinDetectorStep + ")"},
              {"time", fmt(run.prepare_seconds) + " s reading G, " + fmt(run.fit_seconds) + " s fitting, " +
                           fmt(run.reconstruct_seconds) + " s reconstructing"}},
             0);
  print_placements(placements);
  refuse_if_values_changed(acq, a.load.out);
}

}  // namespace

void add_stem_ssb_command(CLI::App* stem) {
  auto a = std::make_shared<SsbArgs>();
  CLI::App* cmd = stem->add_subcommand("ssb", "single-sideband ptychography: the specimen's phase from the bright-field "
                                              "disk, with given aberrations (preview) or fitted ones (--fit)");
  add_load_flags(cmd, a->load, true);
  require_output_format(cmd->add_option("-o,--out", a->load.out, "output .npy (phase, radians), .png or .tif (32-bit "
                                                                 "float radians, the scan step as pixel size); its JSON "
                                                                 "report beside it as OUT.npy.json, OUT.png.json or OUT.tif.json")
                            ->required(),
                        kProductOutputs);
  a->display.add_to(cmd);
  cmd->add_option("--C10", a->C10, "defocus C10 in angstrom (positive: as the simulator's defocus)");
  cmd->add_option("--C12", a->C12, "two-fold astigmatism C12 in angstrom");
  cmd->add_option("--phi12", a->phi12, "astigmatism azimuth in degrees, from +column towards +row");
  cmd->add_option("--aberration", a->higher,
                  "NAME=VALUE[,ANGLE]: a higher-order aberration in angstrom (Krivanek: C21 C23 C30 C32 C34 C41 C43 C45 C50 "
                  "C52 C54 C56) and its azimuth in degrees; repeatable; held fixed by --fit");
  cmd->add_flag("--fit", a->fit, "fit C10, C12, phi12: a seeded TPE search, then Nelder-Mead (ignores --C10/--C12/--phi12)");
  cmd->add_option("--search", a->search,
                  "estimate (default): TPE in a box around the parallax estimate, the wide search when the estimate is "
                  "unreliable; wide: TPE over the whole range (as does giving any --*-range)");
  cmd->add_option("--estimate-trials", a->estimate_trials, "TPE trials around the estimate (default 40)");
  cmd->add_option("--trials", a->trials, "TPE trials of the wide search (default 200)");
  cmd->add_option("--fit-crop", a->fit_crop,
                  "fit on the central N x N positions of a larger scan, then reconstruct the whole once (default 64; 0: "
                  "fit on the whole scan)");
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
  validate_declared_flags(cmd, ssb_params(), {"--scan-bin", "--detector-bin"});
  cmd->callback([a] { run_ssb(*a); });
}

}  // namespace tmorph::cli
