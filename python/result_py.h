// Results and arguments shared by the Python bindings: the named (values, report) pair every computing call
// returns, and checked conversions of Python arguments that raise tm.InvalidArgument naming the argument
// (never pybind11's "Unable to cast"). Call with the GIL held.
#pragma once

#include <array>

#include <pybind11/pybind11.h>

namespace tmorph::python {

// tensormorph.Result(values, report): a tuple subclass with .values and .report (unpacks as before) and a
// notebook view (_repr_html_). Defined in tensormorph/results.py, imported on first use.
pybind11::object named_result(const pybind11::object& values, const pybind11::object& report);

// An int in [lo, hi]; InvalidArgument "WHAT: expected an integer from LO to HI, have X" otherwise (bool refused).
long long integer_argument(const pybind11::handle& value, const char* what, long long lo, long long hi);

// A pair of ints each in [lo, hi], given as a tuple or list of two; `shape` names the form in the message.
std::array<long long, 2> integer_pair_argument(const pybind11::handle& value, const char* what, const char* shape,
                                               long long lo, long long hi);

// A pair of finite or infinite real numbers (not NaN), given as a tuple or list of two.
std::array<double, 2> number_pair_argument(const pybind11::handle& value, const char* what, const char* shape);

}  // namespace tmorph::python
