// tensormorph.stem: 4D-STEM acquisitions (Dectris HDF5) from Python — inspect without decoding, load (a region,
// binned) into a numpy array, and single-sideband ptychography with given or fitted aberrations. Each function
// builds the same requests the CLI's `stem inspect`, `stem load` and `stem ssb` build and returns the same documents.
#pragma once

#include <pybind11/pybind11.h>

namespace tmorph::python {

// Adds the submodule `stem` to m.
void bind_stem(pybind11::module_& m);

}  // namespace tmorph::python
