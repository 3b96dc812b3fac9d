// Reading a whole JSON file: the one place settings, calibration and checkpoint index files go through.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tmorph {

// The parsed document, or nullopt when the file cannot be opened. Text that is not JSON throws
// tmorph::Error(BadInput) "PATH: not valid JSON: ...".
std::optional<nlohmann::json> read_json_file(const std::string& path);

}  // namespace tmorph
