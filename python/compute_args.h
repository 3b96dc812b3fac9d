// The placement keyword arguments of every computing call (backend=, prefer=, never=, allow_approx=),
// parsed into the application's compute request, and the runtime built from it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "app/runtime.h"

namespace tmorph::python {

// None, a string or a sequence of strings as a list (None: empty). Throws InvalidArgument naming `what`
// for another type or a non-string item. Call with the GIL held.
std::vector<std::string> string_list(const pybind11::object& v, const char* what);

// backend: None or a backend name; prefer, never, allow_approx: None, a string or a sequence of strings.
// Throws InvalidArgument naming the argument when one is of another type. Call with the GIL held.
app::ComputeRequest compute_request(const pybind11::object& backend, const pybind11::object& prefer,
                                    const pybind11::object& never, const pybind11::object& allow_approx);

// compute_request with the resource arguments too: threads (None or 1 to 4096) and memory_budget (None, a
// number of bytes, or a size as the CLI's --memory-budget reads it, e.g. "2G").
app::ComputeRequest compute_request(const pybind11::object& threads, const pybind11::object& memory_budget,
                                    const pybind11::object& backend, const pybind11::object& prefer,
                                    const pybind11::object& never, const pybind11::object& allow_approx);

// app::make_runtime(request), whose default plugin folder is the one beside this package
// (<dir>/tensormorph/_core*.so -> <dir>/../plugins: build/plugins in the build tree, and
// P/lib/tensormorph/plugins when installed). No Python calls: may run without the GIL.
std::unique_ptr<app::Runtime> make_runtime(app::ComputeRequest request);

}  // namespace tmorph::python
