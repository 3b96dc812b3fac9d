#include "core/json_file.h"

#include <fstream>
#include <sstream>

#include "core/json_bounded.h"
#include "core/path_kind.h"

namespace tmorph {

std::optional<nlohmann::json> read_json_file(const std::string& path) {
  if (!regular_file_or_missing(path)) return std::nullopt;  // a FIFO would block the read below
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return parse_json_bounded(text.str(), path);
}

}  // namespace tmorph
