// GET /api/acquisitions/{id}/ssb: the viewer's SSB preview, the phase `tensormorph stem ssb` writes for the same
// aberrations and calibration (the same domain call, stem/runs/ssb_run.h's run_ssb), or with fit=1 the fitted ones.
// The face parses the query into an SsbRunRequest, runs it under the render mutex, and sends the phase.
#include <mutex>

#include "ops/placement_json.h"
#include "stem/runs/request_params.h"
#include "stem/runs/ssb_run.h"
#include "tensormorph/error.h"

#include "server/http_util.h"
#include "server/routes.h"
#include "server/stem_request.h"

namespace tmorph::server {

namespace {

// GET /api/acquisitions/{id}/ssb?c10=&c12=&phi12=&semiangle_mrad=&kv=&scan_step_A=&detector_mrad_per_px=
//     &rotation_deg=&center=ROW,COL&radius=&detector_bin=N&scan_shape=ROWS,COLS&format=json|npy
// Kinds, ranges and units as declared in stem/runs/request_params.cpp (as the CLI's flags): c10 and c12 in Å (--C10, --C12; c12 >= 0), phi12 in degrees from +column towards
// +row (--phi12); semiangle_mrad (--semiangle-mrad), kv (--kv), scan_step_A (--scan-step-A),
// detector_mrad_per_px (--detector-mrad-per-px), rotation_deg (--scan-rotation-deg; absent: chosen from the DPC
// candidates by the lower loss, as the CLI does), center (R,C) and radius in unbinned detector pixels
// (--center, --radius), detector_bin (--detector-bin N). Absent: the file's value, as on the CLI. fit=1 (--fit) fits
// C10, C12 and phi12 first, with search=estimate|wide, trials, estimate_trials, seed and fit_crop as the CLI's flags;
// the report's `fit` says how (it runs within the request: the page waits for it).
// format=npy: the bytes `stem ssb … -o phase.npy` writes (float64 radians, [scan rows, scan cols]); json: the
// CLI's report (to_json(SsbRun): aberrations, calibration, disk, rotation, loss, timings, …) plus shape, dtype,
// values, placement, acquisition, product "ssb". No approximation is taken: when G does not fit the memory
// budget, 409 with what the CLI would ask (--allow-approx ssb.bin_detector) or a coarser detector_bin.
void get_ssb(ServerState& state, const httplib::Request& req, httplib::Response& res) {
  ServedAcquisition& served = find_acquisition(state, req.matches[1]);
  const DeclaredQuery q(req, ssb_params());
  const std::string format = format_param(q);
  SsbRunRequest request;
  request.given.C10_A = q.number("c10").value_or(0);
  request.given.C12_A = q.number("c12").value_or(0);
  request.given.phi12_deg = q.number("phi12").value_or(0);
  const auto kv = q.number("kv");
  request.setup.energy_ev = {kv ? std::optional<double>(*kv * 1e3) : std::nullopt, "kv"};
  request.setup.semiangle_mrad = {q.number("semiangle_mrad"), "semiangle_mrad"};
  request.setup.scan_step_A = {q.number("scan_step_A"), "scan_step_A"};
  request.setup.detector_mrad_per_px = {q.number("detector_mrad_per_px"), "detector_mrad_per_px"};
  request.setup.disk = disk_params(q);
  request.scan_rotation_deg = q.number("rotation_deg");
  request.scan_rotation_source = "rotation_deg";
  // The fit's parameters are read (so checked) whether or not fit=1 asks for the fit, as every declared one is.
  const auto search = q.choice("search");
  const auto trials = q.count("trials"), estimate_trials = q.count("estimate_trials"), seed = q.count("seed");
  if (q.on("fit", false)) {  // fit C10, C12 and phi12 as `stem ssb --fit` does (its defaults where not given)
    SsbFitOptions fit;
    fit.search = search.value_or("estimate") == "wide" ? SsbSearch::Wide : SsbSearch::Estimate;
    if (trials) fit.tpe.trials = static_cast<unsigned>(*trials);
    if (estimate_trials) fit.estimate_trials = static_cast<unsigned>(*estimate_trials);
    if (seed) fit.tpe.seed = *seed;
    request.fit = fit;
  }
  if (const auto n = q.count("fit_crop")) request.fit_crop = *n;
  view_params(q, request.load, false);
  request.load.scan_shape = pair_param(q, "scan_shape");
  check_ssb_request(request, Face::Http);

  const Acquisition acq = reopen(served);
  require_complete(acq);
  const auto rt = state.compute.current();
  request.load.threads = rt->threads;
  request.load.memory_budget = rt->memory_budget;
  const Planner planner = rt->planner();
  // progress_id: frames as they are decoded, then the fit's loss evaluations (its search planned, its simplex
  // open-ended); DELETE /api/progress/{id} cancels between frame batches and between evaluations.
  ProgressScope tracked(track_load(state, q, request.load));
  if (OperationProgress* p = tracked.get(); p && request.fit) {
    request.fit->cancel = &p->cancel_flag();
    request.fit->progress = [p](const SsbFitProgress& f) {
      p->update(std::string("fitting the aberrations: ") + f.stage, f.stage_evaluations, f.stage_planned);
    };
  }
  SsbRun run;
  try {
    run = run_tracked(state, tracked.get(), [&] { return run_ssb_with_consent(acq, request, planner, false); });
    tracked.done();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::PrecisionRefused) throw;
    throw HttpError(409, std::string(e.what()) + " The preview takes no approximation: the CLI would ask for consent "
                                                 "(tensormorph stem ssb --allow-approx " + kSsbBinDetectorStep +
                                                 "); here, ask for a coarser detector_bin=N.");
  }
  nlohmann::json doc = to_json(run);
  doc["acquisition"] = served.id;
  doc["product"] = "ssb";
  doc["placement"] = placements_json(run.placements);
  send_values(res, format, "<f8", {run.result.rows, run.result.cols}, run.result.phase, std::move(doc));
}

}  // namespace

void add_stem_ssb_routes(httplib::Server& svr, ServerState& state) {
  svr.Get(R"(/api/acquisitions/([^/]+)/ssb)",
          guarded([&state](const httplib::Request& req, httplib::Response& res) { get_ssb(state, req, res); }));
}

}  // namespace tmorph::server
