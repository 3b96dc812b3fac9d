#include "core/folder_walk.h"

#include <algorithm>
#include <filesystem>

#include "tensormorph/error.h"

namespace tmorph {

namespace fs = std::filesystem;

namespace {

void collect(const fs::path& dir, const std::function<bool(const std::string&)>& match, std::vector<std::string>& out) {
  std::error_code ec;
  fs::directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code entry_ec;
    const fs::file_status st = it->symlink_status(entry_ec);
    if (entry_ec) continue;
    if (fs::is_directory(st)) {
      collect(it->path(), match, out);
    } else if (it->is_regular_file(entry_ec) && !entry_ec) {
      const std::string p = fs::absolute(it->path()).lexically_normal().string();
      if (match(p)) out.push_back(p);
    }
  }
}

}  // namespace

std::vector<std::string> find_regular_files(const std::string& folder, const std::function<bool(const std::string& path)>& match) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) throw Error(ErrorKind::InvalidArgument, folder + ": not a folder");
  std::vector<std::string> out;
  collect(folder, match, out);
  std::sort(out.begin(), out.end());
  return out;
}

std::string only_file_in(const std::string& folder, const std::vector<std::string>& found, const std::string& what) {
  if (found.empty()) throw Error(ErrorKind::InvalidArgument, folder + ": no " + what + " file in this folder");
  if (found.size() > 1) {
    std::string list;
    for (const auto& f : found) list += "\n  " + f;
    throw Error(ErrorKind::InvalidArgument, folder + ": " + std::to_string(found.size()) +
                                                " acquisitions here (see `tensormorph stem discover`); name one:" + list);
  }
  return found[0];
}

}  // namespace tmorph
