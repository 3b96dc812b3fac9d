#include "core/json_file.h"

#include <fstream>
#include <sstream>

#include "tensormorph/error.h"

namespace tmorph {

std::optional<nlohmann::json> read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::BadInput, path + ": not valid JSON: " + e.what());
  }
}

}  // namespace tmorph
