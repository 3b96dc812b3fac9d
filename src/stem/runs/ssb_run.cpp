#include "stem/runs/ssb_run.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <string>

#include "core/json_number.h"
#include "stem/distribution/distributed_ssb.h"
#include "stem/products/dpc.h"
#include "stem/products/products.h"
#include "tensormorph/error.h"

namespace tmorph {


namespace {

// The part of the scan a fit runs on: the central crop of `side` output positions per axis, in source
// coordinates (within the request's region, honouring its bins); nullopt when the scan is not larger.
std::optional<LoadRequest> fit_part(const LoadPlan& plan, const LoadRequest& load, uint64_t side, nlohmann::json* report) {
  const uint64_t rows = plan.output_shape[0], cols = plan.output_shape[1];
  if (side == 0 || (rows <= side && cols <= side)) return std::nullopt;
  const uint64_t r = std::min(rows, side), c = std::min(cols, side);
  LoadRequest part = load;
  Box box;
  box.r0 = plan.scan_region.r0 + (rows - r) / 2 * load.scan_bin[0], box.r1 = box.r0 + r * load.scan_bin[0];
  box.c0 = plan.scan_region.c0 + (cols - c) / 2 * load.scan_bin[1], box.c1 = box.c0 + c * load.scan_bin[1];
  part.scan_region = box;
  *report = {{"scan_region", {{box.r0, box.r1}, {box.c0, box.c1}}},
             {"positions", {r, c}},
             {"reason", "the central " + std::to_string(r) + " x " + std::to_string(c) + " positions of the " + std::to_string(rows) +
                            " x " + std::to_string(cols) + " scan (a fit runs on a central crop of at most " + std::to_string(side) +
                            " per side; the whole scan is then reconstructed once)"}};
  return part;
}

}  // namespace

SsbRun run_ssb(const Acquisition& acq, const SsbRunRequest& request, const Planner& planner) {
  SsbRun run;
  run.fit_options = request.fit;
  const LoadPlan plan = plan_load(acq, request.load);
  const uint64_t det_rows = plan.output_shape[2], det_cols = plan.output_shape[3];

  run.setup = resolve_ssb_setup(acq, request.load, request.setup, planner, &run.placements);
  const auto problem_for = [&](const LoadRequest& load, SsbFrameSource& source) {
    const LoadPlan p = plan_load(acq, load);
    SsbFrames frames = source.frames();
    frames.excluded_pixels = run.setup.excluded_pixels;
    return std::make_unique<SsbProblem>(frames, p.output_shape[0], p.output_shape[1], det_rows, det_cols, run.setup.calibration(0),
                                        load.threads, load.memory_budget, planner);
  };
  // The DPC rotation over the whole scan, when no rotation is given: called after the first SsbProblem is built, so
  // that a request refused for memory is refused before this pass over the frames (and the binned retries of
  // run_ssb_with_consent do not repeat it for nothing).
  const auto find_dpc = [&]() {
    ProductRequest sums;
    sums.load = request.load;
    const ProductResult r = compute_products(acq, sums, planner);
    run.placements.insert(run.placements.end(), r.placements.begin(), r.placements.end());
    return find_dpc_rotation(center_of_mass(r));
  };
  std::optional<DpcRotation> dpc;

  if (request.fit) {
    // Fit (and decide the branch) on the part; reconstruct the whole once.
    const std::optional<LoadRequest> part = fit_part(plan, request.load, request.fit_crop, &run.fit_part);
    {
      const LoadRequest& load = part ? *part : request.load;
      SsbFrameSource source(acq, load);
      const std::unique_ptr<SsbProblem> problem = problem_for(load, source);
      if (!request.scan_rotation_deg) dpc = find_dpc();
      const double theta0 = request.scan_rotation_deg ? *request.scan_rotation_deg : ssb_rotation_candidates(*dpc)[0];
      SsbFitOptions fit_options = *request.fit;
      if (!fit_options.cancel) fit_options.cancel = request.load.cancel;  // the caller's one flag stops both
      run.fit = ssb_fit_aberrations(*problem, theta0, fit_options);
      const auto t_branch = std::chrono::steady_clock::now();
      run.branch = ssb_decide_branch(*problem, run.fit->fitted, theta0, request.scan_rotation_deg.has_value());
      run.fit_seconds = run.fit->seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - t_branch).count();
      run.prepare_seconds += problem->prepare_seconds();
      if (!part) {
        run.result = std::move(run.branch->images);
        run.provenance = source.provenance();
        run.ranks = source.ranks();
      } else if (!source.ranks().is_null()) {
        run.fit_part["ranks"] = source.ranks();
      }
      run.branch->images = SsbResult{};
    }
    run.aberrations = run.branch->aberrations;
    if (request.scan_rotation_deg) {
      run.rotation = {*request.scan_rotation_deg, "degree", request.scan_rotation_source, ""};
    } else {
      SsbRotationSearch s;
      s.dpc = *dpc;
      s.candidates_deg = ssb_rotation_candidates(*dpc);
      s.losses = {run.branch->loss[0], run.branch->loss[1]};
      s.chosen = run.branch->conjugate ? 1 : 0;
      s.rotation = {s.candidates_deg[s.chosen], "degree",
                    "DPC rotation (mod 180 degrees); the 180-degree flip with the conjugate aberrations by the phase's skewness "
                    "(fit.branch)", ""};
      run.rotation = s.rotation;
      run.rotation_search = s;
    }
    if (part) {
      SsbFrameSource source(acq, request.load);
      const std::unique_ptr<SsbProblem> problem = problem_for(request.load, source);
      run.result = problem->evaluate(run.aberrations, run.rotation.value);
      run.reconstruct_seconds = run.result.seconds;
      run.prepare_seconds += problem->prepare_seconds();
      run.provenance = source.provenance();
      run.ranks = source.ranks();
    }
    run.placements.push_back(run.result.placement);
    return run;
  }

  // Preview: the given aberrations, at the given rotation or the DPC candidate with the lower loss.
  SsbFrameSource source(acq, request.load);
  const std::unique_ptr<SsbProblem> problem = problem_for(request.load, source);
  if (request.scan_rotation_deg) {
    run.rotation = {*request.scan_rotation_deg, "degree", request.scan_rotation_source, ""};
    run.result = problem->evaluate(request.given, run.rotation.value);
  } else {
    std::vector<SsbResult> solved;
    run.rotation_search = choose_ssb_scan_rotation(find_dpc(), [&](double candidate) {
      solved.push_back(problem->evaluate(request.given, candidate));
      return solved.back().loss;
    });
    run.rotation = run.rotation_search->rotation;
    run.result = std::move(solved.at(static_cast<size_t>(run.rotation_search->chosen)));
  }
  run.reconstruct_seconds = run.result.seconds;
  run.aberrations = request.given;
  run.placements.push_back(run.result.placement);  // the per-pixel work (every evaluation ran where this one did)
  run.prepare_seconds = problem->prepare_seconds();
  run.provenance = source.provenance();
  run.ranks = source.ranks();
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
  report["aberrations_source"] = run.fit ? "fitted (" + run.fit->search + ", then Nelder-Mead; branch: fit.branch)"
                                        : std::string("given (preview; no fit)");
  if (run.fit && run.fit_options) {
    report["fit"] = to_json(*run.fit, *run.fit_options);
    if (run.branch) report["fit"]["branch"] = to_json(*run.branch);
    report["fit"]["part"] = run.fit_part.is_null() ? nlohmann::json{{"reason", "the whole scan"}} : run.fit_part;
  }
  report["calibration"] = ssb_calibration_json(run.setup, run.rotation);
  report["loss"] = json_number(run.result.loss);
  report["bright_field_pixels"] = run.result.bf_pixels;
  report["memory_bytes"] = run.result.memory_bytes;
  report["seconds"] = run.prepare_seconds + run.fit_seconds + run.reconstruct_seconds;  // reading G, fitting, reconstructing
  report["timings"] = {{"prepare_s", run.prepare_seconds}, {"fit_s", run.fit_seconds}, {"reconstruct_s", run.reconstruct_seconds}};
  report["provenance"] = run.provenance;
  report["approximation"] = run.approximation;
  if (!run.ranks.is_null()) report["ranks"] = run.ranks;
  return report;
}

}  // namespace tmorph
