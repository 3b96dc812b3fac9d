#include "errors.h"

#include <exception>

#include "tensormorph/error.h"

namespace py = pybind11;

namespace tmorph::python {

namespace {

// The classes, created once at import and alive for the interpreter's life (never released).
PyObject* g_classes[7] = {};

size_t slot(ErrorKind k) {
  switch (k) {
    case ErrorKind::InvalidArgument: return 0;
    case ErrorKind::BadInput: return 1;
    case ErrorKind::Unavailable: return 2;
    case ErrorKind::PrecisionRefused: return 3;
    case ErrorKind::Io: return 4;
    case ErrorKind::Internal: return 5;
    case ErrorKind::Incomplete: return 6;
  }
  return 5;
}

}  // namespace

void register_errors(py::module_& m) {
  PyObject* base = PyErr_NewExceptionWithDoc("tensormorph.Error",
                                             "Base of every tensormorph error; exit_code is the CLI's for the same failure.",
                                             PyExc_Exception, nullptr);
  if (!base) throw py::error_already_set();
  m.add_object("Error", py::handle(base));  // add_object steals nothing: the module takes a new reference
  struct Kind {
    ErrorKind kind;
    const char* name;
    const char* doc;
  };
  static const Kind kinds[] = {
      {ErrorKind::InvalidArgument, "InvalidArgument", "Something malformed was asked for (CLI exit 2)."},
      {ErrorKind::BadInput, "BadInput", "A file is truncated, corrupt or lies about its contents (CLI exit 3)."},
      {ErrorKind::Unavailable, "Unavailable", "No backend or kernel here can serve the request (CLI exit 4)."},
      {ErrorKind::PrecisionRefused, "PrecisionRefused",
       "Only an approximation could serve it and allow_approx did not consent (CLI exit 5)."},
      {ErrorKind::Io, "IoError", "The operating system refused (open, map, read) (CLI exit 6)."},
      {ErrorKind::Internal, "InternalError", "A bug in tensormorph (CLI exit 70)."},
      {ErrorKind::Incomplete, "Incomplete",
       "Everything readable was reported, but some data was damaged or missing (CLI exit 7)."},
  };
  py::setattr(py::handle(base), "exit_code", py::int_(1));
  for (const Kind& k : kinds) {
    const std::string qualified = std::string("tensormorph.") + k.name;
    PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), k.doc, base, nullptr);
    if (!cls) throw py::error_already_set();
    py::setattr(py::handle(cls), "exit_code", py::int_(Error(k.kind, "").exit_code()));
    g_classes[slot(k.kind)] = cls;
    m.add_object(k.name, py::handle(cls));
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyErr_SetString(g_classes[slot(e.kind())], e.what());
    }
  });
}

}  // namespace tmorph::python
