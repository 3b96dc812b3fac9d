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
    const std::string name = spec.substr(0, eq);
    int index = -1;
    for (int i = 0; i < kHigherOrders; ++i)
      if (name == kHigherOrderNames[i]) index = i;
    const auto bad = [&](const std::string& why) {
      throw Error(ErrorKind::InvalidArgument, "--aberration " + spec + ": " + why);
    };
    if (eq == std::string::npos || index < 0) {
      std::string names;
      for (const char* n : kHigherOrderNames) names += std::string(names.empty() ? "" : ", ") + n;
      bad("expected NAME=VALUE[,ANGLE] with NAME one of " + names + " (C10, C12: --C10, --C12)");
    }
    const std::string rest = spec.substr(eq + 1);
    double value = 0, angle = 0;
    if (rest.find(',') != std::string::npos) std::tie(value, angle) = parse_limits(rest, "--aberration " + name);
    else std::tie(value, angle) = parse_limits(rest + ",0", "--aberration " + name);
    if (!std::isfinite(value) || !std::isfinite(angle)) bad("values must be finite");
    if (kHigherOrderNames[index][2] == '0' && angle != 0) bad(name + " is round (m = 0): it has no azimuth");
    ab.higher_A[index] = value, ab.higher_deg[index] = angle;
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

// C10, C12, phi12 always; the higher orders that are not zero as "C30": Å and "phi23": degrees.
nlohmann::json aberrations_json(const Aberrations& ab) {
  nlohmann::json j = {{"C10", ab.C10_A}, {"C12", ab.C12_A}, {"phi12", ab.phi12_deg}};
  for (int i = 0; i < kHigherOrders; ++i) {
    if (ab.higher_A[i] == 0) continue;
    const std::string name = kHigherOrderNames[i];
    j[name] = ab.higher_A[i];
    if (name[2] != '0') j["phi" + name.substr(1)] = ab.higher_deg[i];
  }
  return j;
}

// A calibration value with where it came from.
struct Sourced {
  double value = NAN;
  std::string source;
};

// The first scalar of the file's metadata whose HDF5 path ends with `suffix`, converted to `unit`
// (angstrom or mrad) when its units say how.
std::optional<Sourced> from_file(const Acquisition& acq, const std::string& suffix, const std::string& unit) {
  for (const auto& [path, entry] : acq.metadata.items()) {
    if (path.size() < suffix.size() || path.compare(path.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    if (!entry.is_object() || !entry.contains("value") || !entry["value"].is_number()) continue;
    const double v = entry["value"].get<double>();
    const std::string units = entry.value("units", "");
    double scale = 0;
    if (unit == "angstrom") scale = units == "angstrom" || units == "A" ? 1 : units == "nm" ? 10 : units == "m" ? 1e10 : 0;
    if (unit == "mrad") scale = units == "mrad" ? 1 : units == "rad" ? 1e3 : 0;
    if (scale == 0) continue;
    return Sourced{v * scale, "file: " + path};
  }
  return std::nullopt;
}

Sourced require(const std::optional<Sourced>& s, const std::string& what, const std::string& flag) {
  if (!s) throw Error(ErrorKind::InvalidArgument, "stem ssb: the file does not record the " + what + "; give " + flag);
  if (!(s->value > 0) || !std::isfinite(s->value))
    throw Error(ErrorKind::InvalidArgument, "stem ssb: the " + what + " (" + s->source + ") must be a positive number");
  return *s;
}

nlohmann::json sourced_json(const Sourced& s, const char* unit) { return {{"value", s.value}, {"unit", unit}, {"source", s.source}}; }

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

  // Calibration of the raw acquisition (file or flags), then scaled by the bins of this request.
  const Sourced energy = std::isnan(a.kv) ? require(acq.beam_energy_ev ? std::optional<Sourced>(Sourced{*acq.beam_energy_ev, "file: beam energy"})
                                                                         : std::nullopt, "beam energy", "--kv")
                                          : require(Sourced{a.kv * 1e3, "--kv"}, "beam energy", "--kv");
  const Sourced semi = std::isnan(a.semiangle_mrad)
                           ? require(acq.convergence_semi_angle_mrad
                                         ? std::optional<Sourced>(Sourced{*acq.convergence_semi_angle_mrad, "file: convergence_semi_angle"})
                                         : std::nullopt,
                                     "convergence semi-angle", "--semiangle-mrad")
                           : require(Sourced{a.semiangle_mrad, "--semiangle-mrad"}, "convergence semi-angle", "--semiangle-mrad");
  Sourced step = std::isnan(a.scan_step_A) ? require(from_file(acq, "/scan_step", "angstrom"), "scan step", "--scan-step-A")
                                           : require(Sourced{a.scan_step_A, "--scan-step-A"}, "scan step", "--scan-step-A");
  if (load.scan_bin[0] != load.scan_bin[1])
    throw Error(ErrorKind::InvalidArgument, "stem ssb: the scan must be binned equally on both axes (one scan step)");
  step.value *= static_cast<double>(load.scan_bin[0]);

  // The bright-field disk of the frames as loaded: given, or detected from the mean pattern.
  BrightFieldDisk disk;
  // --center takes fractional pixels (a detected centre passes back exactly); SSB checks it lies on the detector.
  const std::optional<std::pair<double, double>> center =
      a.center.empty() ? std::nullopt : std::optional<std::pair<double, double>>(parse_limits(a.center, "--center"));
  if (center && a.radius > 0) {
    disk.row = center->first, disk.col = center->second, disk.radius = a.radius;
    report["disk"] = {{"row", disk.row}, {"col", disk.col}, {"radius", disk.radius}, {"source", "given"}};
  } else {
    ProductRequest pattern;
    pattern.load = load;
    pattern.frame_sums = false, pattern.pattern = true;
    const ProductResult r = compute_products(acq, pattern, planner);
    placements.insert(placements.end(), r.placements.begin(), r.placements.end());
    disk = detect_bright_field_disk(mean_pattern(r), r.frame_shape[0], r.frame_shape[1]);
    report["disk"] = {{"row", disk.row}, {"col", disk.col}, {"radius", disk.radius}, {"source", "detected"}};
  }
  Sourced mrad_px;
  if (!std::isnan(a.mrad_per_px)) {
    mrad_px = require(Sourced{a.mrad_per_px, "--detector-mrad-per-px"}, "detector angle per pixel", "--detector-mrad-per-px");
    mrad_px.value *= static_cast<double>(load.detector_bin[0]);
  } else if (auto f = from_file(acq, "/detector_angle_per_pixel", "mrad")) {
    mrad_px = require(f, "detector angle per pixel", "--detector-mrad-per-px");
    mrad_px.value *= static_cast<double>(load.detector_bin[0]);
  } else {
    mrad_px = {semi.value / disk.radius, "convergence semi-angle / bright-field disk radius"};
  }
  if (load.detector_bin[0] != load.detector_bin[1])
    throw Error(ErrorKind::InvalidArgument, "stem ssb: the detector must be binned equally on both axes");

  SsbCalibration cal;
  cal.energy_ev = energy.value, cal.semiangle_mrad = semi.value, cal.scan_step_A = step.value;
  cal.detector_mrad_per_px = mrad_px.value;
  cal.disk_row = disk.row, cal.disk_col = disk.col, cal.disk_radius_px = disk.radius;
  const Aberrations given = with_higher_orders({a.C10, a.C12, a.phi12}, a.higher);
  StemLoader loader(acq, load);
  SsbFrames frames = ssb_frames_from_loader(loader);
  for (uint64_t i = 0; i < acq.pixel_mask.size() && load.mask_bad_pixels && load.detector_bin[0] == 1 &&
                       !load.detector_region; ++i)
    if (acq.pixel_mask[i]) frames.excluded_pixels.push_back(static_cast<uint32_t>(i));
  // G once (the frames are read a single time); every rotation candidate and fit trial reuses it.
  const SsbProblem problem(frames, scan_rows, scan_cols, det_rows, det_cols, cal, rt->threads, rt->memory_budget, planner);
  double fit_seconds = 0, reconstruct_seconds = 0;
  struct Solution {
    Aberrations ab;
    std::optional<SsbFit> fit;
    double loss = 0;
    std::optional<SsbResult> images;  // the preview's reconstruction (a fit reconstructs once at the end)
  };
  // For one scan rotation: the given aberrations, or the fit's.
  const auto solve = [&](double rotation) {
    Solution s{given, std::nullopt, 0, std::nullopt};
    if (fit_opts) {
      s.fit = ssb_fit_aberrations(problem, rotation, *fit_opts);
      fit_seconds += s.fit->seconds;
      s.ab = s.fit->fitted, s.loss = s.fit->loss;
    } else {
      s.images = problem.evaluate(given, rotation);
      reconstruct_seconds += s.images->seconds;
      s.loss = s.images->loss;
    }
    return s;
  };

  // Scan rotation: given; or from the DPC rotation (the angle that makes the CoM field curl-free is
  // -rotation mod 180), its 180-degree ambiguity settled by the lower SSB loss (after fitting each, with --fit).
  Solution chosen;
  Sourced rotation;
  if (!std::isnan(a.rotation_deg)) {
    rotation = {a.rotation_deg, "--scan-rotation-deg"};
    chosen = solve(rotation.value);
  } else {
    ProductRequest sums;
    sums.load = load;
    const ProductResult r = compute_products(acq, sums, planner);
    placements.insert(placements.end(), r.placements.begin(), r.placements.end());
    const DpcRotation dpc = find_dpc_rotation(center_of_mass(r));
    const double base = std::fmod(360.0 - dpc.angle * 180 / M_PI, 180.0);
    Solution first = solve(base), second = solve(base + 180);
    report["rotation_search"] = {{"dpc_angle_deg", dpc.angle * 180 / M_PI}, {"dpc_transpose", dpc.transpose},
                                 {"candidates_deg", {base, base + 180}}, {"losses", {first.loss, second.loss}}};
    const bool take_second = second.loss < first.loss;
    rotation = {take_second ? base + 180 : base, "DPC rotation, 180-degree flip by the lower SSB loss"};
    chosen = take_second ? std::move(second) : std::move(first);
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
  report["aberrations"] = aberrations_json(ab);
  report["aberrations_unit"] = {{"C10", "angstrom"}, {"C12", "angstrom"}, {"phi12", "degree"}};
  report["aberrations_source"] = chosen.fit ? "fitted (TPE search, then Nelder-Mead)" : "given (preview; no fit)";
  if (chosen.fit) {
    const SsbFit& f = *chosen.fit;
    report["fit"] = {{"trials", f.trials},
                     {"seed", fit_opts->tpe.seed},
                     {"search_space", {{"C10_nm", {fit_opts->c10_low_nm, fit_opts->c10_high_nm}},
                                       {"C12_nm", {fit_opts->c12_low_nm, fit_opts->c12_high_nm}},
                                       {"phi12_deg", {fit_opts->phi12_low_deg, fit_opts->phi12_high_deg}}}},
                     {"tpe_best", aberrations_json(f.tpe_best)},
                     {"tpe_best_loss", f.tpe_best_loss},
                     {"nelder_mead", {{"iterations", f.simplex_iterations}, {"evaluations", f.simplex_evaluations},
                                      {"converged", f.simplex_converged}}},
                     {"evaluations", f.evaluations},
                     {"seconds", f.seconds}};
  }
  report["calibration"] = {{"energy", sourced_json(energy, "eV")},
                           {"semiangle", sourced_json(semi, "mrad")},
                           {"scan_step", sourced_json(step, "angstrom")},
                           {"detector_angle_per_pixel", sourced_json(mrad_px, "mrad")},
                           {"scan_rotation", sourced_json(rotation, "degree")},
                           {"wavelength_A", electron_wavelength_A(energy.value)}};
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
      if (!a.center.empty() || !std::isnan(a.radius)) {  // given in unbinned pixels: scale them
        if (!a.center.empty()) {
          const auto [r, c] = parse_limits(a.center, "--center");
          binned.center = std::to_string((r + 0.5) / static_cast<double>(factor) - 0.5) + "," +
                          std::to_string((c + 0.5) / static_cast<double>(factor) - 0.5);
        }
        if (!std::isnan(a.radius)) binned.radius = a.radius / static_cast<double>(factor);
      }
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
  cmd->add_option("--center", a->center, "R,C: the bright-field disk centre in pixels, fractional allowed (with --radius; default: detected)");
  cmd->add_option("--radius", a->radius, "the bright-field disk radius in pixels");
  cmd->callback([a] { run_ssb(*a); });
}

}  // namespace tmorph::cli
