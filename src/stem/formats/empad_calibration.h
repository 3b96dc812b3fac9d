// The calibration an EMPAD sidecar records (docs/stem.md, "EMPAD", Calibration), put where the calibration rule
// (stem/calibration.h) finds it, each value with the XML path it came from. The readings, as the EMPAD acquisition
// software writes them under <iom_measurements> (element names as independent readers look them up: rosettasciio
// reads the field of view; other published EMPAD readers, in IDL and Python, the voltage, camera length, diffraction
// angle and scan_size; a reader of EMPAD2 sidecars the Column… names):
//   - beam energy: source.get_voltage, else high_voltage, else ColumnSourceHighVoltage (volts) -> Acquisition::
//     beam_energy_ev (an electron through V volts gains V eV), and "empad/beam_energy" {value, units "V", from};
//   - detector angle per pixel: calibrated_diffraction_angle (radians per detector pixel) ->
//     "empad/detector_angle_per_pixel" {value, units "rad", from};
//   - camera length: optics.get_cameralength, else nominal_camera_length, else
//     ColumnOpticsGetCameraLengthNominalCameraLength (metres, nominal) -> "empad/camera_length" (not used by any
//     product: the calibrated diffraction angle is what converts pixels to angles);
//   - scan step (2-D scans only): optics.get_full_scan_field_of_view "[x, y]" (metres, the microscope's full scan
//     frame) × root/scan_parameters/scan_size (the fraction of that frame the EMPAD scan covers; 1 when absent) ÷
//     the scan's columns (x) and rows (y) -> "empad/scan_step" {value, units "m", from} when both axes give the same
//     step (within 1e-9 relative), else "empad/scan_step_x" and "_y" (not used: the rule needs one step).
// A reading that is present but not a positive finite number (or a field of view that is not "[x, y]") is not
// used, and "empad/calibration_not_used" says which and why; it never refuses the acquisition.
// calibrated_pixelsize is not used (its unit differs between EMPAD generations and readers).
#pragma once

#include "stem/acquisition.h"
#include "stem/formats/empad_xml.h"

namespace tmorph {

// Adds the calibration above to `a` (its metadata and beam_energy_ev) from the parsed sidecar `x`.
void add_empad_calibration(Acquisition& a, const EmpadXml& x);

}  // namespace tmorph
