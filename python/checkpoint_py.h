// tensormorph.Checkpoint (what tensormorph.open returns) and tensormorph.open itself.
#pragma once

#include <pybind11/pybind11.h>

namespace tmorph::python {

void bind_checkpoint(pybind11::module_& m);

}  // namespace tmorph::python
