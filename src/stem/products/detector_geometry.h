// Resolving where the detector's geometry comes from, for every product and SSB alike: the bright-field disk
// (given, detected from the mean pattern, or detected and partly given), the detector's angular pixel size
// (calibration.h's one rule, from that disk) and a product's virtual detector (a preset around the disk, an
// annulus in pixels or mrad, or a user mask), each with a JSON report fragment.
//
// Contract (docs/stem.md, "Products"):
// - Coordinates are in pixels of the output detector frame (after any detector crop and bin); a centre is
//   fractional (row, col) in pixel-index units, as detect_bright_field_disk reports it.
// - Disk: with a centre and a radius given, nothing is read (source "given"); otherwise one pattern pass
//   (stem.pattern_reduce) detects the disk (virtual_detector.h) and a given centre or radius replaces the
//   detected one (source "detected, partly given"; else "detected"). A given radius must be > 0 and a given
//   centre finite (Error(InvalidArgument) otherwise, before anything is read).
// - Detector: a preset kind takes preset_radii(kind, disk radius); mask takes, in this order, a user mask
//   file, inner/outer in mrad (converted with the angular pixel size, which must then be known), or inner/outer
//   in pixels (a missing inner is 0, a missing outer infinite; outer must be > 0 and >= inner). The annulus is
//   annulus_pixels around the disk centre. A rectangle (mask only; virtual_detector.h's half-open contract, in
//   output detector pixels) excludes every other detector field and ignores the disk. When the angular pixel size is known the report also gives the radii
//   in mrad (inner_mrad, outer_mrad) and the size itself with its source (angle_per_pixel).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stem/calibration.h"
#include "stem/load.h"
#include "stem/products/product_kind.h"
#include "stem/products/virtual_detector.h"
#include "tensormorph/placement.h"
#include "tensormorph/planner.h"

namespace tmorph {

struct DiskRequest {
  std::optional<std::array<double, 2>> center;  // (row, col), fractional output detector pixels
  std::optional<double> radius;                 // output detector pixels, > 0
  std::string radius_name = "radius";           // how the caller names the radius in errors (e.g. "--radius")
};

struct ResolvedDisk {
  BrightFieldDisk disk;     // area and threshold only when detected
  std::string source;       // "given", "detected", "detected, partly given" (or "detected (prepared)": the cache's)
  bool detected = false;
};

// {"row", "col", "radius", "source"} and, when detected, "area" and "threshold".
nlohmann::json to_json(const ResolvedDisk& d);

// The request expressed in the pixels of a detector binned `factor` times more on both axes (the centre of
// the bin's members: (x + 0.5) / factor − 0.5; the radius / factor).
DiskRequest binned(const DiskRequest& request, uint64_t factor);

// The contract above with the mean pattern (rows × cols, float64) computed only when needed.
ResolvedDisk resolve_bright_field_disk(const DiskRequest& request, const std::function<std::vector<double>()>& mean_pattern,
                                       uint64_t rows, uint64_t cols);
// The same with the pattern pass of compute_products over `load` (its placements appended to `placements`).
ResolvedDisk resolve_bright_field_disk(const Acquisition& acq, const LoadRequest& load, const DiskRequest& request,
                                       const Planner& planner, std::vector<Placement>* placements);

// The disk, the convergence semi-angle and the angular pixel size that follows from both: what every product
// and SSB resolve first. The semi-angle and the pixel size may be unknown (not every product needs them).
struct DetectorGeometry {
  ResolvedDisk disk;
  Sourced semiangle_mrad;
  Sourced angle_per_pixel;  // mrad per output detector pixel (calibration.h's rule)
};
DetectorGeometry resolve_detector_geometry(const Acquisition& acq, const LoadRequest& load, const DiskRequest& disk,
                                           const Override& semiangle_mrad, const Override& mrad_per_px, const Planner& planner,
                                           std::vector<Placement>* placements);
// The same around a disk already resolved (the product cache's, source "detected (prepared)"): no pass.
DetectorGeometry detector_geometry_around(const Acquisition& acq, const LoadRequest& load, const ResolvedDisk& disk,
                                          const Override& semiangle_mrad, const Override& mrad_per_px);

struct DetectorRequest {
  ProductKind kind = ProductKind::bf;            // a preset, or mask (then the fields below)
  std::string mask_file;                         // a user mask (.npy or .png), nonzero = inside
  std::optional<double> inner_mrad, outer_mrad;  // an annulus in mrad
  std::optional<double> inner_px, outer_px;      // an annulus in pixels
  std::optional<DetectorRect> rect;              // a rectangle of output detector pixels (mask only)
};

struct ResolvedDetector {
  std::string kind;                // "annulus", "user mask" or "rectangle"
  std::vector<uint32_t> pixels;    // sorted row-major indices of the output frame
  double inner_px = 0, outer_px = 0;  // annulus radii (outer may be infinite)
  std::string given_in;            // annulus: "pixels" (presets too) or "mrad"
  std::string mask_file;           // user mask
  DetectorRect rect;               // rectangle
  Sourced angle_per_pixel;         // may be unknown (then no mrad read-outs)
};

// The annulus given in mrad, else in pixels, else the product's preset around the disk (a preset product with
// given radii is that annulus, as on the CLI); for mask, a mask file first. Throws Error(InvalidArgument) for
// a mask without a detector, a rectangle beside radii or a mask file (or on a product other than mask), bad radii, mrad radii without an angular pixel size (its `missing` text), and
// what annulus_pixels and mask_pixels_from_file throw.
ResolvedDetector resolve_virtual_detector(const DetectorRequest& request, const BrightFieldDisk& disk,
                                          const std::array<uint64_t, 2>& frame, const Sourced& angle_per_pixel);

// An annulus's report: {"kind": "annulus", "inner_px", "outer_px", "given_in", "pixels"} (an infinite outer
// radius as "inf") and, with a known angular pixel size, "inner_mrad", "outer_mrad" and "angle_per_pixel".
nlohmann::json annulus_json(double inner_px, double outer_px, const std::string& given_in, uint64_t pixels,
                            const Sourced& angle_per_pixel);
// annulus_json for an annulus; {"kind": "user mask", "file", "pixels"} for a user mask; {"kind": "rectangle",
// "rect": [r0, c0, r1, c1], "rows": [r0, r1], "cols": [c0, c1], "pixels"} for a rectangle (half-open ranges).
nlohmann::json to_json(const ResolvedDetector& d);

}  // namespace tmorph
