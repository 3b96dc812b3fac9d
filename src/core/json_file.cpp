#include "core/json_file.h"

#include <fstream>
#include <sstream>

#include "core/json_bounded.h"

namespace tmorph {

std::optional<nlohmann::json> read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return parse_json_bounded(text.str(), path);
}

}  // namespace tmorph
