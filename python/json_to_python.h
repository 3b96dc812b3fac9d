// A JSON document (from app's encoders) as plain Python objects: dict, list, str, int, float, bool, None.
// Conversion only, no second encoder: the values are exactly the ones the CLI's --json prints (non-finite
// numbers stay the strings "nan", "inf", "-inf"). Call with the GIL held.
#pragma once

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

namespace tmorph::python {

pybind11::object to_python(const nlohmann::json& j);

}  // namespace tmorph::python
