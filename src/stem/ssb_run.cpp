#include "stem/ssb_run.h"

#include <cmath>
#include <string>

#include "core/json_number.h"
#include "stem/dpc.h"
#include "stem/products.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

// The aberrations for one scan rotation: the given ones evaluated, or the fit's (reconstructed later).
struct Solution {
  Aberrations ab;
  std::optional<SsbFit> fit;
  double loss = 0;
  std::optional<SsbResult> images;  // a preview's reconstruction (a fit reconstructs once, at the end)
};

}  // namespace

SsbRun run_ssb(const Acquisition& acq, const SsbRunRequest& request, const Planner& planner) {
  SsbRun run;
  run.fit_options = request.fit;
  const LoadPlan plan = plan_load(acq, request.load);
  const uint64_t scan_rows = plan.output_shape[0], scan_cols = plan.output_shape[1];
  const uint64_t det_rows = plan.output_shape[2], det_cols = plan.output_shape[3];

  run.setup = resolve_ssb_setup(acq, request.load, request.setup, planner, &run.placements);
  StemLoader loader(acq, request.load);
  SsbFrames frames = ssb_frames_from_loader(loader);
  frames.excluded_pixels = run.setup.excluded_pixels;
  // G once (the frames are read a single time); every rotation candidate and fit trial reuses it.
  const SsbProblem problem(frames, scan_rows, scan_cols, det_rows, det_cols, run.setup.calibration(0), request.load.threads,
                           request.load.memory_budget, planner);

  const auto solve = [&](double rotation_deg) {
    Solution s{request.given, std::nullopt, 0, std::nullopt};
    if (request.fit) {
      s.fit = ssb_fit_aberrations(problem, rotation_deg, *request.fit);
      run.fit_seconds += s.fit->seconds;
      s.ab = s.fit->fitted, s.loss = s.fit->loss;
    } else {
      s.images = problem.evaluate(request.given, rotation_deg);
      run.reconstruct_seconds += s.images->seconds;
      s.loss = s.images->loss;
    }
    return s;
  };

  Solution chosen;
  if (request.scan_rotation_deg) {
    run.rotation = {*request.scan_rotation_deg, "degree", request.scan_rotation_source, ""};
    chosen = solve(run.rotation.value);
  } else {
    ProductRequest sums;
    sums.load = request.load;
    const ProductResult r = compute_products(acq, sums, planner);
    run.placements.insert(run.placements.end(), r.placements.begin(), r.placements.end());
    std::vector<Solution> solved;
    run.rotation_search = choose_ssb_scan_rotation(find_dpc_rotation(center_of_mass(r)), [&](double candidate) {
      solved.push_back(solve(candidate));
      return solved.back().loss;
    });
    run.rotation = run.rotation_search->rotation;
    chosen = std::move(solved.at(static_cast<size_t>(run.rotation_search->chosen)));
  }
  if (!chosen.images) {
    chosen.images = problem.evaluate(chosen.ab, run.rotation.value);
    run.reconstruct_seconds += chosen.images->seconds;
  }
  run.result = std::move(*chosen.images);
  run.aberrations = chosen.ab;
  run.fit = std::move(chosen.fit);
  run.placements.push_back(run.result.placement);  // the per-pixel work (every evaluation ran where this one did)
  run.prepare_seconds = problem.prepare_seconds();
  run.provenance = loader.provenance();
  return run;
}

SsbRun run_ssb_with_consent(const Acquisition& acq, const SsbRunRequest& request, const Planner& planner,
                            bool consent_to_bin_detector) {
  try {
    return run_ssb(acq, request, planner);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::PrecisionRefused) throw;
    if (!consent_to_bin_detector)
      throw Error(ErrorKind::PrecisionRefused, std::string(e.what()) + " Or consent to binning the detector by the smallest factor "
                                               "that fits: --allow-approx " + kSsbBinDetectorStep + ".");
    const std::array<uint64_t, 2> asked = request.load.detector_bin;
    for (uint64_t factor = 2; factor <= 64; factor *= 2) {
      SsbRunRequest binned = request;
      binned.load.detector_bin = {asked[0] * factor, asked[1] * factor};
      binned.setup.disk = tmorph::binned(request.setup.disk, factor);  // a given disk is in unbinned pixels
      try {
        SsbRun run = run_ssb(acq, binned, planner);
        run.approximation = {{"step", kSsbBinDetectorStep},
                             {"detector_bin", {asked[0] * factor, asked[1] * factor}},
                             {"refused_without", e.what()}};
        return run;
      } catch (const Error& again) {
        if (again.kind() != ErrorKind::PrecisionRefused) throw;
      }
    }
    throw Error(ErrorKind::PrecisionRefused, std::string(e.what()) + " (--allow-approx " + kSsbBinDetectorStep +
                                             ": no detector bin up to 64 fits either)");
  }
}

nlohmann::json to_json(const SsbRun& run) {
  nlohmann::json report;
  report["disk"] = to_json(run.setup.geometry.disk);
  if (run.rotation_search) report["rotation_search"] = to_json(*run.rotation_search);
  report["shape"] = {run.result.rows, run.result.cols};
  report["aberrations"] = to_json(run.aberrations);
  report["aberrations_unit"] = {{"C10", "angstrom"}, {"C12", "angstrom"}, {"phi12", "degree"}};
  report["aberrations_source"] = run.fit ? "fitted (TPE search, then Nelder-Mead)" : "given (preview; no fit)";
  if (run.fit && run.fit_options) {
    const SsbFit& f = *run.fit;
    const SsbFitOptions& o = *run.fit_options;
    report["fit"] = {{"trials", f.trials},
                     {"seed", o.tpe.seed},
                     {"search_space", {{"C10_nm", {o.c10_low_nm, o.c10_high_nm}},
                                       {"C12_nm", {o.c12_low_nm, o.c12_high_nm}},
                                       {"phi12_deg", {o.phi12_low_deg, o.phi12_high_deg}}}},
                     {"tpe_best", to_json(f.tpe_best)},
                     {"tpe_best_loss", json_number(f.tpe_best_loss)},
                     {"nelder_mead", {{"iterations", f.simplex_iterations}, {"evaluations", f.simplex_evaluations},
                                      {"converged", f.simplex_converged}}},
                     {"evaluations", f.evaluations},
                     {"seconds", f.seconds}};
  }
  report["calibration"] = ssb_calibration_json(run.setup, run.rotation);
  report["loss"] = json_number(run.result.loss);
  report["bright_field_pixels"] = run.result.bf_pixels;
  report["memory_bytes"] = run.result.memory_bytes;
  report["seconds"] = run.prepare_seconds + run.fit_seconds + run.reconstruct_seconds;  // reading G, fitting, reconstructing
  report["timings"] = {{"prepare_s", run.prepare_seconds}, {"fit_s", run.fit_seconds}, {"reconstruct_s", run.reconstruct_seconds}};
  report["provenance"] = run.provenance;
  report["approximation"] = run.approximation;
  return report;
}

}  // namespace tmorph
