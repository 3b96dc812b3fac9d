// The extension module tensormorph._core: a face of the application layer, like the CLI. It parses
// Python arguments, calls app/ and the domains, and returns plain Python objects and numpy arrays.
#include <pybind11/pybind11.h>

#include "checkpoint_py.h"
#include "compute_args.h"
#include "documents.h"
#include "errors.h"
#include "json_to_python.h"
#include "read_array.h"
#include "stem_py.h"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  using namespace tmorph::python;
  m.doc() = "Tensormorph's engine: checkpoints and 4D-STEM acquisitions as numpy arrays, statistics and reports as plain dicts.";
  m.attr("__version__") = TM_VERSION;
  register_errors(m);
  bind_mapping(m);
  bind_checkpoint(m);
  bind_stem(m);
  m.def(
      "backends",
      [](const py::object& backend, const py::object& prefer, const py::object& never, const py::object& allow_approx) {
        const tmorph::app::ComputeRequest request = compute_request(backend, prefer, never, allow_approx);
        nlohmann::json doc;
        {
          py::gil_scoped_release unlocked;
          doc = backends_document(request);
        }
        return to_python(doc);
      },
      py::kw_only(), py::arg("backend") = py::none(), py::arg("prefer") = py::none(), py::arg("never") = py::none(),
      py::arg("allow_approx") = py::none(),
      "Every backend as `tensormorph backends --json` lists it: name, description, origin, available, reason, detail, "
      "devices, kernels.");
}
