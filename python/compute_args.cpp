#include "compute_args.h"

#include <dlfcn.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tensormorph/error.h"

namespace py = pybind11;

namespace tmorph::python {

namespace {

// The folder of the shared object this function is in (the extension module), or "" when unknown.
std::string module_dir() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&module_dir), &info) || !info.dli_fname) return "";
  std::error_code ec;
  const auto p = std::filesystem::weakly_canonical(info.dli_fname, ec);
  return ec ? "" : p.parent_path().string();
}

}  // namespace

std::vector<std::string> string_list(const py::object& v, const char* what) {
  if (v.is_none()) return {};
  if (py::isinstance<py::str>(v)) return {v.cast<std::string>()};
  std::vector<std::string> out;
  if (py::isinstance<py::sequence>(v)) {
    for (const auto& item : v) {
      if (!py::isinstance<py::str>(item)) throw Error(ErrorKind::InvalidArgument, std::string(what) + ": expected strings");
      out.push_back(item.cast<std::string>());
    }
    return out;
  }
  throw Error(ErrorKind::InvalidArgument, std::string(what) + ": expected None, a string or a list of strings");
}

app::ComputeRequest compute_request(const py::object& backend, const py::object& prefer, const py::object& never,
                                    const py::object& allow_approx) {
  app::ComputeRequest r;
  r.face = Face::Python;
  if (!backend.is_none()) {
    if (!py::isinstance<py::str>(backend)) throw Error(ErrorKind::InvalidArgument, "backend: expected None or a string");
    r.backend = backend.cast<std::string>();
  }
  r.prefer = string_list(prefer, "prefer");
  r.never = string_list(never, "never");
  r.allow_approx = string_list(allow_approx, "allow_approx");
  return r;
}

app::ComputeRequest compute_request(const py::object& threads, const py::object& memory_budget, const py::object& backend,
                                    const py::object& prefer, const py::object& never, const py::object& allow_approx) {
  app::ComputeRequest c = compute_request(backend, prefer, never, allow_approx);
  if (!threads.is_none()) {
    const auto t = threads.cast<long long>();
    if (t < 1 || t > 4096) throw Error(ErrorKind::InvalidArgument, "threads: expected 1 to 4096, have " + std::to_string(t));
    c.threads = static_cast<unsigned>(t);
  }
  if (!memory_budget.is_none()) c.memory_budget = py::str(memory_budget).cast<std::string>();
  return c;
}

std::unique_ptr<app::Runtime> make_runtime(app::ComputeRequest request) {
  const std::string dir = module_dir();
  if (!dir.empty()) request.default_plugin_dir = (std::filesystem::path(dir) / "../../plugins").lexically_normal().string();
  auto rt = app::make_runtime(&request);
  // Acquisitions stay resident across calls in this Python process: stem.resident_memory or a quarter of RAM.
  app::apply_resident_memory(*rt, app::quarter_of_ram());
  return rt;
}

}  // namespace tmorph::python
