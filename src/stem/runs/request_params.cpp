// The 4D-STEM operations' parameter declarations and the checks of typed requests (request_params.h).
#include "stem/runs/request_params.h"

#include <cmath>
#include <limits>

namespace tmorph {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMaxPixels = 1e6;  // detector pixels: radii, centres
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

using K = ParamKind;

// Rows shared by several operations (each operation lists its own; the spellings agree).
constexpr ParamSpec kInner{"inner", "inner", "--inner", K::Number, 0, kMaxPixels, false, "detector pixels", "", 1, "inner radius (inclusive)"};
constexpr ParamSpec kOuter{"outer", "outer", "--outer", K::Number, 0, kMaxPixels, false, "detector pixels", "", 1, "outer radius (inclusive)"};
constexpr ParamSpec kCenter{"center", "center", "--center", K::Numbers, -kMaxPixels, kMaxPixels, false, "detector pixels", "ROW,COL", 2,
                            "the bright-field disk's centre, fractional allowed"};
constexpr ParamSpec kRadius{"radius", "radius", "--radius", K::Number, 0, kMaxPixels, true, "detector pixels", "", 1, "the bright-field disk's radius"};
constexpr ParamSpec kScanShape{"scan_shape", "scan_shape", "--scan-shape", K::Counts, 0, 0, false, "", "ROWS,COLS", 2, "the scan's shape"};
constexpr ParamSpec kScanRegion{"scan_region", "scan_region", "--scan-region", K::Counts, 0, 0, false, "", "R0,R1,C0,C1", 4, "half-open scan rows and columns"};
constexpr ParamSpec kDetectorRegion{"", "detector_region", "--detector-region", K::Counts, 0, 0, false, "", "R0,R1,C0,C1", 4,
                                    "half-open detector rows and columns"};
constexpr ParamSpec kScanBin{"", "scan_bin", "--scan-bin", K::Count, 1, 1e6, false, "scan positions per side", "", 1, "scan binning"};
constexpr ParamSpec kDetectorBin{"detector_bin", "detector_bin", "--detector-bin", K::Count, 1, 1024, false, "detector pixels per side", "", 1,
                                 "detector binning"};
// Calibration overrides that products and movies take on the CLI only (SSB's, which the server takes too, are its own rows).
constexpr ParamSpec kCliSemiangle{"", "", "--semiangle-mrad", K::Number, 0, 1000, true, "mrad", "", 1, "probe convergence semi-angle"};
constexpr ParamSpec kCliMradPerPx{"", "", "--detector-mrad-per-px", K::Number, 0, 1000, true, "mrad per unbinned detector pixel", "", 1,
                                  "detector angle per pixel"};
// Python only: progress reports while frames are decoded (python/interrupt.h: True or a callable).
constexpr ParamSpec kPythonProgress{"", "progress", "", K::Text, 0, 0, false, "", "", 1,
                                    "True (a line on sys.stderr) or a callable taking {frames_done, frames_total, seconds}"};
// Where and how an operation runs (app::ComputeRequest), in the faces that take them.
constexpr ParamSpec kThreads{"", "threads", "--threads", K::Count, 1, 4096, false, "", "", 1, "host threads"};
constexpr ParamSpec kMemoryBudget{"", "memory_budget", "--memory-budget", K::Text, 0, 0, false, "", "", 1, "bytes one op may hold"};
constexpr ParamSpec kBackend{"", "backend", "--backend", K::Text, 0, 0, false, "", "", 1, "strict: only this backend"};
constexpr ParamSpec kPrefer{"", "prefer", "--prefer", K::Text, 0, 0, false, "", "", 1, "backends to prefer"};
constexpr ParamSpec kNever{"", "never", "--never", K::Text, 0, 0, false, "", "", 1, "backends never to use"};
constexpr ParamSpec kAllowApprox{"", "allow_approx", "--allow-approx", K::Text, 0, 0, false, "", "", 1, "approximation steps consented to"};

// HTTP only: the page's name for this request's progress (GET / DELETE /api/progress/{id}, server/operation_progress.h).
constexpr ParamSpec kProgressId{"progress_id", "", "", K::Text, 0, 0, false, "", "TOKEN", 1,
                                "names this request's progress and cancellation: GET / DELETE /api/progress/TOKEN"};

constexpr ParamSpec kNpyFormat{"format", "", "", K::Choice, 0, 0, false, "", "json|npy", 1, "the response's form"};

constexpr ParamSpec kProduct[] = {
    kInner,
    kOuter,
    {"inner_mrad", "inner_mrad", "--inner-mrad", K::Number, 0, 1000, false, "mrad", "", 1, "inner radius in mrad"},
    {"outer_mrad", "outer_mrad", "--outer-mrad", K::Number, 0, 1000, false, "mrad", "", 1, "outer radius in mrad"},
    {"rect", "", "--rect", K::Counts, 0, 0, false, "detector pixels", "R0,C0,R1,C1", 4, "a rectangle of detector pixels (mask)"},
    {"", "mask", "--mask", K::Text, 0, 0, false, "", "", 1, "a user mask (.npy or .png)"},
    kCenter,
    kRadius,
    {"max", "max_pattern", "--max", K::Switch, 0, 0, false, "", "", 1, "mean-dp: the max pattern"},
    {"of", "of", "--of", K::Choice, 0, 0, false, "", "mean-dp|bf|abf|adf|haadf|df|mask", 1, "fft: the product transformed"},
    {"rotation_deg", "rotation_deg", "--rotation-deg", K::Number, -360, 360, false, "degrees", "", 1, "dpc/idpc: the rotation"},
    {"transpose", "transpose", "--transpose", K::Switch, 0, 0, false, "", "", 1, "dpc/idpc: swap the components"},
    kCliSemiangle,
    kCliMradPerPx,
    kScanShape,
    kScanRegion,
    kDetectorRegion,
    kScanBin,
    kDetectorBin,
    {"", "cache", "--cache", K::Text, 0, 0, false, "", "", 1, "the prepared-products cache"},
    {"", "use_cache", "", K::Switch, 0, 0, false, "", "", 1, "answer from the prepared-products cache"},
    kNpyFormat,
    kThreads, kMemoryBudget, kBackend, kPrefer, kNever, kAllowApprox,
    kProgressId,
    kPythonProgress,
};

// The calibration overrides SSB and the calibration document take.
constexpr ParamSpec kKv{"kv", "", "--kv", K::Number, 0, 10000, true, "kV", "", 1, "accelerating voltage"};
constexpr ParamSpec kSemiangle{"semiangle_mrad", "", "--semiangle-mrad", K::Number, 0, 1000, true, "mrad", "", 1, "probe convergence semi-angle"};
constexpr ParamSpec kScanStep{"scan_step_A", "", "--scan-step-A", K::Number, 0, 1e7, true, "Å", "", 1, "scan step"};
constexpr ParamSpec kDetectorMradPerPx{"detector_mrad_per_px", "", "--detector-mrad-per-px", K::Number, 0, 1000, true,
                                       "mrad per unbinned detector pixel", "", 1, "detector angle per pixel"};

constexpr ParamSpec kSsb[] = {
    {"c10", "C10", "--C10", K::Number, -1e7, 1e7, false, "Å", "", 1, "defocus"},
    {"c12", "C12", "--C12", K::Number, 0, 1e7, false, "Å", "", 1, "two-fold astigmatism magnitude (its direction is phi12)"},
    {"phi12", "phi12", "--phi12", K::Number, -360, 360, false, "degrees", "", 1, "astigmatism azimuth"},
    kKv, kSemiangle, kScanStep, kDetectorMradPerPx,
    {"rotation_deg", "scan_rotation_deg", "--scan-rotation-deg", K::Number, -360, 360, false, "degrees", "", 1, "scan rotation"},
    kCenter,
    kRadius,
    {"fit", "fit", "--fit", K::Switch, 0, 0, false, "", "", 1, "fit C10, C12 and phi12"},
    {"search", "search", "--search", K::Choice, 0, 0, false, "", "estimate|wide", 1, "the fit's search"},
    {"trials", "trials", "--trials", K::Count, 1, 100000, false, "", "", 1, "TPE trials of the wide search"},
    {"estimate_trials", "estimate_trials", "--estimate-trials", K::Count, 1, 100000, false, "", "", 1, "TPE trials around the estimate"},
    {"seed", "seed", "--seed", K::Count, 0, kMaxExactInteger, false, "", "", 1, "TPE seed"},
    {"fit_crop", "fit_crop", "--fit-crop", K::Count, 0, 1e6, false, "scan positions per side", "", 1, "the fit's central crop (0: the whole scan)"},
    {"scan_shape", "", "--scan-shape", K::Counts, 0, 0, false, "", "ROWS,COLS", 2, "the scan's shape"},
    {"", "scan_region", "--scan-region", K::Counts, 0, 0, false, "", "R0,R1,C0,C1", 4, "half-open scan rows and columns"},
    kScanBin,
    {"detector_bin", "detector_bin", "--detector-bin", K::Count, 1, 64, false, "detector pixels per side", "", 1, "detector binning"},
    kNpyFormat,
    kThreads, kMemoryBudget, kBackend, kPrefer, kNever, kAllowApprox,
    kProgressId,
    kPythonProgress,
};

constexpr ParamSpec kMovie[] = {
    {"along", "", "--patterns-along", K::Text, 0, 0, false, "", "R0,C0:R1,C1", 1, "the patterns on this scan line"},
    {"sweep", "", "--sweep", K::Choice, 0, 0, false, "", "inner|outer", 1, "the annulus radius that sweeps"},
    {"from", "", "--from", K::Number, 0, kMaxPixels, false, "detector pixels", "", 1, "the sweep's first radius"},
    {"to", "", "--to", K::Number, 0, kMaxPixels, false, "detector pixels", "", 1, "the sweep's last radius"},
    {"steps", "", "--steps", K::Count, 1, 512, false, "frames", "", 1, "frames"},
    {"inner", "", "--inner", K::Number, 0, kMaxPixels, false, "detector pixels", "", 1, "the fixed inner radius"},
    {"outer", "", "--outer", K::Number, 0, kMaxPixels, false, "detector pixels", "", 1, "the fixed outer radius"},
    {"fps", "", "--fps", K::Number, 0, 100, true, "frames per second", "", 1, "frame rate"},
    {"center", "", "--center", K::Numbers, -kMaxPixels, kMaxPixels, false, "detector pixels", "ROW,COL", 2, "the disk's centre"},
    {"radius", "", "--radius", K::Number, 0, kMaxPixels, true, "detector pixels", "", 1, "the disk's radius"},
    {"detector_bin", "", "--detector-bin", K::Count, 1, 1024, false, "detector pixels per side", "", 1, "detector binning"},
    kCliSemiangle,
    kCliMradPerPx,
    {"colormap", "", "--colormap", K::Text, 0, 0, false, "", "", 1, "colour map"},
    {"transform", "", "--transform", K::Choice, 0, 0, false, "", "linear|log|signed-log", 1, "display transform"},
    {"lo", "", "", K::Number, -kInf, kInf, false, "", "", 1, "the colour scale's low end"},
    {"hi", "", "", K::Number, -kInf, kInf, false, "", "", 1, "the colour scale's high end"},
    {"", "", "--limits", K::Numbers, -kInf, kInf, false, "", "LO,HI", 2, "the colour scale's ends"},
    {"format", "", "", K::Choice, 0, 0, false, "", "gif|mp4", 1, "the movie's container"},
    kThreads, kMemoryBudget, kBackend, kPrefer, kNever, kAllowApprox,
    kProgressId,
};

constexpr ParamSpec kFrame[] = {
    {"row", "", "", K::Count, 0, kMaxExactInteger, false, "", "", 1, "the scan row"},
    {"col", "", "", K::Count, 0, kMaxExactInteger, false, "", "", 1, "the scan column"},
    kScanShape,
    kDetectorBin,
    {"masked", "", "", K::Switch, 0, 0, false, "", "", 1, "zero bad pixels and sentinels"},
    kNpyFormat,
};

constexpr ParamSpec kBlock[] = {
    kScanShape, kScanRegion, kDetectorBin,
    {"rows", "", "", K::Counts, 0, 0, false, "", "R0,R1", 2,
     "only these scan rows of the view, half-open (the page fetches a block in bands to show its progress)"},
};
constexpr ParamSpec kChunks[] = {
    {"start", "", "", K::Count, 0, kMaxExactInteger, false, "frames", "", 1, "the window's first frame"},
    {"count", "", "", K::Count, 1, 65536, false, "frames", "", 1, "frames in the window"},
};
constexpr ParamSpec kCalibration[] = {kScanShape, kKv, kSemiangle, kScanStep, kDetectorMradPerPx};

const OperationSchema kOperations[] = {
    {"stem.product", kProduct}, {"stem.ssb", kSsb}, {"stem.movie", kMovie}, {"stem.frame", kFrame}, {"stem.block", kBlock}, {"stem.calibration", kCalibration},
    {"stem.chunks", kChunks},
};

void check_optional(const OperationSchema& op, std::string_view name, const std::optional<double>& v, Face face) {
  if (v) check_number(op.at(name), face, *v);
}

void check_disk(const OperationSchema& op, const DiskRequest& disk, Face face) {
  if (disk.center) {
    const ParamSpec& c = op.at("center");
    for (double x : *disk.center)
      if (!std::isfinite(x) || x < c.lo || x > c.hi) refuse(c, face, number_text((*disk.center)[0]) + "," + number_text((*disk.center)[1]));
  }
  check_optional(op, "radius", disk.radius, face);
}

void check_bins(const OperationSchema& op, const LoadRequest& load, Face face) {
  for (uint64_t b : load.detector_bin) check_count(op.at("detector_bin"), face, b);
  for (uint64_t b : load.scan_bin)
    if (b != 1) check_count(kScanBin, face, b);
}


}  // namespace

const OperationSchema& product_params() { return kOperations[0]; }
const OperationSchema& ssb_params() { return kOperations[1]; }
const OperationSchema& movie_params() { return kOperations[2]; }
const OperationSchema& frame_params() { return kOperations[3]; }
const OperationSchema& block_params() { return kOperations[4]; }
const OperationSchema& calibration_params() { return kOperations[5]; }
const OperationSchema& chunks_params() { return kOperations[6]; }

const OperationSchema* stem_operation(std::string_view name) {
  for (const auto& op : kOperations)
    if (op.name == name) return &op;
  return nullptr;
}

void check_product_request(const ProductSpec& spec, Face face) {
  const OperationSchema& op = product_params();
  const DetectorRequest& d = spec.detector;
  check_optional(op, "inner", d.inner_px, face);
  check_optional(op, "outer", d.outer_px, face);
  check_optional(op, "inner_mrad", d.inner_mrad, face);
  check_optional(op, "outer_mrad", d.outer_mrad, face);
  check_disk(op, spec.disk, face);
  check_optional(op, "rotation_deg", spec.rotation.angle_deg, face);
  check_optional(op, "--semiangle-mrad", spec.semiangle_mrad.value, face);  // set by the CLI only
  check_optional(op, "--detector-mrad-per-px", spec.angle_per_pixel.value, face);
  check_bins(op, spec.load, face);
}

void check_ssb_request(const SsbRunRequest& r, Face face) {
  const OperationSchema& op = ssb_params();
  check_number(op.at("c10"), face, r.given.C10_A);
  check_number(op.at("c12"), face, r.given.C12_A);
  check_number(op.at("phi12"), face, r.given.phi12_deg);
  if (r.setup.energy_ev.value) check_number(op.at("kv"), face, *r.setup.energy_ev.value / 1e3);
  check_optional(op, "semiangle_mrad", r.setup.semiangle_mrad.value, face);
  check_optional(op, "scan_step_A", r.setup.scan_step_A.value, face);
  check_optional(op, "detector_mrad_per_px", r.setup.detector_mrad_per_px.value, face);
  check_optional(op, "rotation_deg", r.scan_rotation_deg, face);
  check_disk(op, r.setup.disk, face);
  if (r.fit) {
    check_count(op.at("trials"), face, r.fit->tpe.trials);
    check_count(op.at("estimate_trials"), face, r.fit->estimate_trials);
  }
  check_count(op.at("fit_crop"), face, r.fit_crop);
  check_bins(op, r.load, face);
}

void check_movie_request(const MovieRequest& r, double fps, Face face) {
  const OperationSchema& op = movie_params();
  check_number(op.at("fps"), face, fps);
  if (r.mode != MovieMode::patterns_along) {
    check_number(op.at("from"), face, r.from);
    check_number(op.at("to"), face, r.to);
    check_count(op.at("steps"), face, r.steps);
  } else if (r.steps != 0) {
    check_count(op.at("steps"), face, r.steps);
  }
  check_optional(op, "inner", r.inner_px, face);
  check_optional(op, "outer", r.outer_px, face);
  check_disk(op, r.base.disk, face);
  check_bins(op, r.base.load, face);
}

}  // namespace tmorph
