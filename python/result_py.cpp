#include "result_py.h"

#include <cmath>
#include <string>

#include "tensormorph/error.h"

namespace py = pybind11;

namespace tmorph::python {

namespace {

std::string shown(const py::handle& value) { return py::repr(value).cast<std::string>(); }

bool is_integer(const py::handle& value) {
  // numpy integers count (they have __index__); bools do not, nor floats.
  return !py::isinstance<py::bool_>(value) && PyIndex_Check(value.ptr()) && !py::isinstance<py::float_>(value);
}

py::tuple two_items(const py::handle& value, const char* what, const char* shape) {
  if ((py::isinstance<py::tuple>(value) || py::isinstance<py::list>(value)) && py::len(value) == 2)
    return py::tuple(py::reinterpret_borrow<py::object>(value));
  throw Error(ErrorKind::InvalidArgument, std::string(what) + ": expected " + shape + ", have " + shown(value));
}

}  // namespace

py::object named_result(const py::object& values, const py::object& report) {
  return py::module_::import("tensormorph.results").attr("Result")(values, report);
}

long long integer_argument(const py::handle& value, const char* what, long long lo, long long hi) {
  const std::string expected = std::string(what) + ": expected an integer from " + std::to_string(lo) + " to " +
                               std::to_string(hi) + ", have ";
  if (!is_integer(value)) throw Error(ErrorKind::InvalidArgument, expected + shown(value));
  const py::int_ as_int = py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(as_int.ptr(), &overflow);
  if (overflow || v < lo || v > hi) throw Error(ErrorKind::InvalidArgument, expected + shown(value));
  return v;
}

std::array<long long, 2> integer_pair_argument(const py::handle& value, const char* what, const char* shape, long long lo,
                                               long long hi) {
  const py::tuple items = two_items(value, what, shape);
  const std::string each = std::string(what) + " " + shape;
  return {integer_argument(items[0], each.c_str(), lo, hi), integer_argument(items[1], each.c_str(), lo, hi)};
}

std::array<double, 2> number_pair_argument(const py::handle& value, const char* what, const char* shape) {
  const py::tuple items = two_items(value, what, shape);
  std::array<double, 2> out{};
  for (size_t i = 0; i < 2; ++i) {
    const py::handle item = items[i];
    if (py::isinstance<py::bool_>(item) || !PyNumber_Check(item.ptr()) || PyComplex_Check(item.ptr()))
      throw Error(ErrorKind::InvalidArgument, std::string(what) + ": expected " + shape + " of numbers, have " + shown(value));
    out[i] = py::float_(py::reinterpret_borrow<py::object>(item)).cast<double>();
    if (std::isnan(out[i]))
      throw Error(ErrorKind::InvalidArgument, std::string(what) + ": expected " + shape + " of numbers, have " + shown(value));
  }
  return out;
}

}  // namespace tmorph::python
