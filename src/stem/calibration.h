// The calibration of a 4D-STEM acquisition as a request sees it: each value with its unit and its source
// (a caller's override, the file's metadata, or a derivation), and the one rule for the detector's angular
// pixel size that every product and SSB use.
//
// Contract (docs/stem.md, "Calibration"):
// - Overrides are in the raw acquisition's units (per unbinned pixel / per unbinned scan step); the file's
//   values are converted from their recorded `units` (angstrom: angstrom, A, nm, m; mrad: mrad, rad) and a
//   file value whose units are missing or unknown is not used.
// - Beam energy (eV): the override, else the file's incident energy (source "file: beam energy").
// - Convergence semi-angle α (mrad): the override, else the file's convergence_semi_angle
//   (source "file: convergence_semi_angle").
// - Scan step (Å per output scan position): (the override, else the file's …/scan_step) × the scan bin; the
//   scan must be binned equally on both axes.
// - Detector angle per pixel (mrad per output detector pixel), THE rule:
//     1. the override × the detector bin (source: the override's name);
//     2. else the file's …/detector_angle_per_pixel × the detector bin (source "file: <path>");
//     3. else derived: α / the bright-field disk radius in output pixels (source "convergence semi-angle /
//        bright-field disk radius"); α as above.
//   1 and 2 need the detector binned equally on both axes (else there is no single angular pixel size).
// - A file value's source is "file: <metadata path>", followed by " (from <fields>)" when the opener derived it
//   and recorded its "from" (EMPAD: "empad/scan_step" from the field of view, scan_size and pix_x).
// - A value that cannot be resolved is `missing` (the reason and what to give); require_positive turns that,
//   or a value that is not a positive finite number, into Error(InvalidArgument).
#pragma once

#include <cmath>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "stem/load.h"

namespace tmorph {

// Relativistic electron wavelength in ångström for an energy in eV.
double electron_wavelength_A(double energy_ev);

// A calibration value: its unit and where it came from.
struct Sourced {
  double value = NAN;
  std::string unit;     // "eV", "mrad", "angstrom", "degree"
  std::string source;   // the override's name (e.g. "--kv"), "file: <HDF5 path>", or the derivation
  std::string missing;  // non-empty when there is no value: why, and what would give one
  bool known() const { return missing.empty(); }
};

// {"value", "unit", "source"}; an unknown value is {"value": null, "unit", "missing"}.
nlohmann::json to_json(const Sourced& s);

// Throws Error(InvalidArgument): s.missing when unknown; "the <what> (<source>) must be a positive number"
// when the value is not a positive finite number. Returns s.
const Sourced& require_positive(const Sourced& s, const std::string& what);

// A value the caller gives (nullopt: not given) and the name the caller knows it by (a CLI flag, a request
// field): the source of a given value, and the hint in a `missing` message.
struct Override {
  std::optional<double> value;
  std::string name;
};

// The first scalar of the acquisition's metadata whose HDF5 path ends with `suffix`, converted to `unit`
// ("angstrom" or "mrad") from its recorded units; nullopt when there is none with convertible units.
std::optional<Sourced> metadata_quantity(const Acquisition& acq, const std::string& suffix, const std::string& unit);

Sourced beam_energy_ev(const Acquisition& acq, const Override& energy_ev);
Sourced convergence_semiangle_mrad(const Acquisition& acq, const Override& semiangle_mrad);
Sourced scan_step_A(const Acquisition& acq, const LoadRequest& load, const Override& step_A);
// The rule above. `semiangle` is convergence_semiangle_mrad's result (used only by the derivation);
// bf_radius_px the bright-field disk radius in output detector pixels.
Sourced detector_angle_per_pixel(const Acquisition& acq, const LoadRequest& load, const Override& mrad_per_px,
                                 const Sourced& semiangle, double bf_radius_px);

}  // namespace tmorph
