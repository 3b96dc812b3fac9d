#include "checkpoint_py.h"

#include <memory>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "compute_args.h"
#include "documents.h"
#include "json_to_python.h"
#include "read_array.h"
#include "tensormorph/error.h"

namespace py = pybind11;

namespace tmorph::python {

namespace {

// An opened checkpoint: the path as given (what the documents name) and its mapped files.
struct PyCheckpoint {
  std::string path;
  std::shared_ptr<const Checkpoint> c;

  const CheckpointTensor& tensor(const std::string& name) const {
    for (const auto& t : c->tensors)
      if (t.name == name) return t;
    throw Error(ErrorKind::InvalidArgument, path + ": no tensor named '" + name + "'");
  }
};

PyCheckpoint open_path(const std::string& path) {
  py::gil_scoped_release unlocked;
  return PyCheckpoint{path, std::make_shared<const Checkpoint>(open_checkpoint(path))};
}

py::object stats_method(const PyCheckpoint& self, const py::object& name, const py::object& backend, const py::object& prefer,
                 const py::object& never, const py::object& allow_approx) {
  std::vector<std::string> names;
  if (py::isinstance<py::str>(name)) names.push_back(name.cast<std::string>());
  else if (!name.is_none())
    for (const auto& n : name) names.push_back(py::cast<std::string>(n));
  const app::ComputeRequest request = compute_request(backend, prefer, never, allow_approx);
  nlohmann::json doc;
  {
    py::gil_scoped_release unlocked;
    doc = stats_document(self.path, names, request);
  }
  return to_python(doc);
}

py::object index_method(const PyCheckpoint& self, const py::object& backend, const py::object& prefer, const py::object& never,
                 const py::object& allow_approx) {
  const app::ComputeRequest request = compute_request(backend, prefer, never, allow_approx);
  nlohmann::json doc;
  {
    py::gil_scoped_release unlocked;
    doc = index_document(self.path, request);
  }
  return to_python(doc);
}

py::list tensor_list(const PyCheckpoint& self) {
  py::list out;
  for (const auto& t : self.c->tensors) out.append(to_python(tensor_listing(*self.c, t)));
  return out;
}

}  // namespace

void bind_checkpoint(py::module_& m) {
  py::class_<PyCheckpoint>(m, "Checkpoint", "A checkpoint opened for reading (safetensors, GGUF, torch.save; sharded or not).")
      .def_readonly("path", &PyCheckpoint::path, "the path as given to open()")
      .def_property_readonly("format", [](const PyCheckpoint& s) { return s.c->format; },
                             "\"safetensors\", \"gguf\" or \"torch\"")
      .def_property_readonly("files", [](const PyCheckpoint& s) {
            std::vector<std::string> out;
            for (const auto& f : s.c->files) out.push_back(f->path());
            return out;
          }, "the files the checkpoint's tensors live in")
      .def_property_readonly("metadata", [](const PyCheckpoint& s) { return s.c->metadata; }, "scalar metadata as text")
      .def_property_readonly("tensors", &tensor_list,
                             "one dict per tensor, in file order: name, stored_type, dtype (None when not dense), shape, "
                             "elements, bytes, file, offset, readable, and unavailable (the reason) when not readable")
      .def("stats", &stats_method, py::arg("name") = py::none(), py::kw_only(), py::arg("backend") = py::none(),
           py::arg("prefer") = py::none(), py::arg("never") = py::none(), py::arg("allow_approx") = py::none(),
           "Exact statistics, the document `tensormorph stats PATH [NAME] --json` prints: of every tensor, or of the "
           "one named (or a list of names). Without placement arguments they come from the index (built as needed).")
      .def("index", &index_method, py::kw_only(), py::arg("backend") = py::none(), py::arg("prefer") = py::none(),
           py::arg("never") = py::none(), py::arg("allow_approx") = py::none(),
           "Opens or builds the checkpoint's index and computes what it lacks; the document `tensormorph index PATH "
           "--json` prints.")
      .def("read", [](const PyCheckpoint& s, const std::string& name, bool raw) { return read_tensor(s.c, s.tensor(name), raw); },
           py::arg("name"), py::kw_only(), py::arg("raw") = false,
           "The tensor's values as numpy: a read-only zero-copy view of the mapping for dense dtypes numpy has; "
           "bf16/f8 widened to float32 (raw=True: their bit patterns as uint16/uint8, zero-copy); quantized and "
           "packed tensors decoded to float32.")
      .def("__repr__", [](const PyCheckpoint& s) {
        return "<tensormorph.Checkpoint " + s.c->format + " '" + s.path + "', " + std::to_string(s.c->tensors.size()) +
               " tensors>";
      });
  m.def("open", &open_path, py::arg("path"),
        "Opens a checkpoint: a directory, a *.safetensors.index.json, a GGUF shard or a single .safetensors / .gguf / "
        "torch.save file. Raises BadInput for a truncated or corrupt file, IoError when the OS refuses.");
}

}  // namespace tmorph::python
