// Reading a whole JSON file: the one place settings, calibration and checkpoint index files go through.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tmorph {

// The parsed document, or nullopt when the file does not exist or cannot be opened. A path that is not a
// regular file throws tmorph::Error(Io). Text that is not JSON, or breaks the
// limits of parse_json_bounded (depth, NUL bytes, repeated keys), throws tmorph::Error(BadInput) "PATH: ...".
std::optional<nlohmann::json> read_json_file(const std::string& path);

}  // namespace tmorph
