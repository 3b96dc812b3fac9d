// Which frames a movie of an acquisition shows (`stem movie`, next the viewer's export): the diffraction
// patterns at the scan positions along a line, or a virtual image while one radius of an annular detector
// sweeps. Each frame is a ProductSpec that compute_product (product_run.h) answers, with its label and the
// physical size of one of its pixels, so a frame is exactly the product `stem <kind>` computes for it.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "stem/acquisition.h"
#include "stem/products/product_run.h"

namespace tmorph {

struct ScanPoint {
  uint64_t row = 0, col = 0;
  bool operator==(const ScanPoint&) const = default;
};

// Positions on the segment from `a` to `b`, both included. steps == 0: every position the line crosses
// (max(|Δrow|, |Δcol|) + 1 of them, each rounded to the nearest position); else `steps` positions evenly
// spaced in parameter (rounded; neighbours may repeat on a short line; steps == 1 gives `a`). Throws
// Error(InvalidArgument) naming a position outside the scan_shape (rows, cols).
std::vector<ScanPoint> scan_line_positions(ScanPoint a, ScanPoint b, uint64_t steps, std::array<uint64_t, 2> scan_shape);

// `steps` values from `from` to `to` evenly spaced, both included (steps == 1: `from`). Throws
// Error(InvalidArgument) for steps < 1 and for values that are negative or not finite (`what` names them).
std::vector<double> sweep_values(double from, double to, uint64_t steps, const std::string& what);

enum class MovieMode { patterns_along, sweep_inner, sweep_outer };

struct MovieRequest {
  MovieMode mode = MovieMode::patterns_along;
  // Load, disk and calibration for every frame (threads and memory budget when computing). Patterns: the
  // load may not crop or bin the scan (positions are of the whole scan).
  ProductSpec base;
  ScanPoint from_position, to_position;  // patterns_along
  uint64_t steps = 0;                    // patterns: 0 = every position on the line; sweeps: >= 1
  double from = NAN, to = NAN;           // sweeps: the swept radius, output detector pixels
  std::optional<double> inner_px, outer_px;  // sweeps: the fixed radius (the other is swept; outer default: none)
};

struct MovieFrameSpec {
  ProductSpec spec;   // kind mean_dp (one scan position) or mask (an annulus in pixels)
  std::string label;  // "scan (r, c)" or "inner 12.0 px, outer 20.0 px"
};

struct MoviePlan {
  std::vector<MovieFrameSpec> frames;
  // The physical size of one product value, for a scale bar: mrad per detector pixel (patterns, by the detector
  // angle rule of calibration.h without a disk detection pass: the override, the file's, or the semi-angle /
  // a given disk radius; else px), nm or angstrom per scan position (virtual images, when the scan
  // step is known; else px).
  double units_per_pixel = 1;
  std::string unit = "px";
  std::string mode;  // "patterns along", "sweep inner", "sweep outer"
};

// Throws Error(InvalidArgument) for a position outside the scan, steps < 1 for a sweep, negative radii, a
// fixed radius missing or a swept annulus whose inner radius would exceed its outer one, a cropped or binned
// scan with patterns; and what plan_load throws.
MoviePlan plan_movie(const Acquisition& acq, const MovieRequest& request);

}  // namespace tmorph
