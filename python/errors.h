// Python exceptions for tmorph::Error: tensormorph.Error and one subclass per ErrorKind, each carrying
// the CLI's exit code as the class attribute `exit_code` and the CLI's message as its text.
#pragma once

#include <pybind11/pybind11.h>

namespace tmorph::python {

// Creates the classes in m and registers the translator from tmorph::Error.
void register_errors(pybind11::module_& m);

}  // namespace tmorph::python
