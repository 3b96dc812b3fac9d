// One SSB reconstruction from an acquisition, as every face runs it (the CLI's `stem ssb`, next the viewer's
// SSB preview and the Python module): the set-up (ssb_setup.h), G read once, the scan rotation given or
// chosen between the DPC candidates by the lower loss, the aberrations given (preview) or fitted
// (ssb_fit.h), and the one approximation SSB may take with consent — all decided here, reported by to_json.
//
// Contract:
// - A fit (ssb_fit.h) runs at the given rotation, or at the first DPC candidate; the branch decision then picks
//   between (fitted, θ) and (conjugate, θ + 180°) — the DPC candidates — by the phase's skewness (or keeps the
//   given rotation's). On a scan larger than fit_crop per side the fit (and the branch) runs on the central crop,
//   then the whole scan is reconstructed once.
// - The detector geometry given in the request (disk centre and radius) is in unbinned detector pixels.
// - When G does not fit the memory budget, run_ssb throws Error(PrecisionRefused). run_ssb_with_consent then
//   names the approximation in the message (kSsbBinDetectorStep), or, with the caller's consent to it,
//   retries with the detector binned by 2, 4, … 64 times the bin asked for (the disk rescaled to the binned
//   pixels) and records what it did in SsbRun::approximation; no bin that fits is PrecisionRefused again.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "stem/load.h"
#include "stem/ssb/ssb.h"
#include "stem/ssb/ssb_fit.h"
#include "stem/ssb/ssb_setup.h"
#include "tensormorph/planner.h"

namespace tmorph {

// The approximation step a caller consents to (as --allow-approx ssb.bin_detector on the CLI).
inline constexpr const char* kSsbBinDetectorStep = "ssb.bin_detector";

// A fit on a scan larger than this (positions per side, after bins) runs on its central crop of this side, then
// the whole scan is reconstructed once with the fitted values (the report's fit.part says so).
inline constexpr uint64_t kSsbFitCrop = 64;

struct SsbRunRequest {
  LoadRequest load;                           // frames, regions and bins; its threads and memory budget are used
  SsbSetupRequest setup;                      // disk (unbinned pixels) and calibration overrides
  Aberrations given;                          // the preview's aberrations (a fit starts from its fixed orders)
  std::optional<SsbFitOptions> fit;           // fit C10, C12 and φ12 instead of using `given`
  std::optional<double> scan_rotation_deg;    // given; else chosen from the DPC candidates by the lower loss
  const char* scan_rotation_source = "given"; // how the caller names a given rotation (e.g. "--scan-rotation-deg")
  uint64_t fit_crop = kSsbFitCrop;            // a fit runs on the central fit_crop × fit_crop positions; 0: the whole scan
};

struct SsbRun {
  SsbSetup setup;
  SsbResult result;                           // the reconstruction at `aberrations` and `rotation`
  Aberrations aberrations;
  std::optional<SsbFit> fit;
  std::optional<SsbFitOptions> fit_options;
  std::optional<SsbBranch> branch;            // the fit's branch decision (its images moved into `result`)
  nlohmann::json fit_part;                    // {scan_region, positions, reason} of the part fitted on
  Sourced rotation;                           // degrees, with its source
  std::optional<SsbRotationSearch> rotation_search;
  double prepare_seconds = 0, fit_seconds = 0, reconstruct_seconds = 0;
  std::vector<Placement> placements;          // set-up, DPC sums, then the per-pixel work
  nlohmann::json provenance;                  // of the frames read
  nlohmann::json approximation;               // null, or {step, detector_bin, refused_without}
  nlohmann::json ranks;                       // across MPI ranks: each rank's read of G (distributed_ssb.h); else null
};

// Runs the reconstruction (see the contract above). Throws Error(PrecisionRefused) when G does not fit.
SsbRun run_ssb(const Acquisition& acq, const SsbRunRequest& request, const Planner& planner);

// run_ssb, and when refused for memory: the refusal naming kSsbBinDetectorStep, or with consent the binned
// retries of the contract.
SsbRun run_ssb_with_consent(const Acquisition& acq, const SsbRunRequest& request, const Planner& planner,
                            bool consent_to_bin_detector);

// The report: disk, rotation_search (when searched), shape, aberrations (+ unit, source), fit (when fitted:
// trials, seed, search_space, tpe_best, tpe_best_loss, nelder_mead, evaluations, seconds), calibration,
// loss, bright_field_pixels, memory_bytes, seconds, timings {prepare_s, fit_s, reconstruct_s}, provenance,
// approximation, and ranks across MPI ranks (fit.part.ranks for a fit part read across them). Numbers follow
// core/json_number.h's rule.
nlohmann::json to_json(const SsbRun& run);

}  // namespace tmorph
