// Dectris (Arina, Eiger) HDF5 acquisitions (formats/dectris.h reads them) as Acquisitions.
#include "formats/dectris.h"
#include "stem/formats/acquisition_openers.h"

namespace tmorph {

namespace {

Acquisition open_dectris_acquisition(const std::string& path) {
  DectrisFile f = open_dectris(path);
  Acquisition a;
  a.format = "dectris";
  a.master = std::move(f.master);
  a.layout = std::move(f.layout);
  a.parts = std::move(f.parts);
  a.dtype = f.dtype;
  a.element_size = f.element_size;
  a.detector_rows = f.detector_rows;
  a.detector_cols = f.detector_cols;
  a.frames_present = f.frames_present;
  a.frames_extent = f.frames_extent;
  a.frames_expected = f.frames_expected;
  a.metadata = std::move(f.metadata);
  a.pixel_mask = std::move(f.pixel_mask);
  a.pixel_mask_path = std::move(f.pixel_mask_path);
  a.saturation_value = f.saturation_value;
  a.beam_energy_ev = f.beam_energy_ev;
  a.convergence_semi_angle_mrad = f.convergence_semi_angle_mrad;
  a.description = std::move(f.description);
  a.scan_shape_recorded = f.scan_shape_recorded;
  a.scan_shape_path = std::move(f.scan_shape_path);
  a.signature = std::move(f.signature);
  a.problems = std::move(f.problems);
  a.value_problems = std::move(f.value_problems);
  return a;
}

}  // namespace

extern const AcquisitionOpener kDectrisOpener{"dectris", looks_like_dectris, open_dectris_acquisition, discover_masters, ".h5 .hdf5 .nxs"};

}  // namespace tmorph
