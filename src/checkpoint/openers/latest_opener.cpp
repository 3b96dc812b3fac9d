// A training run's folder whose pointer file names the checkpoint folder to open: DeepSpeed's `latest` (a tag,
// e.g. global_step1000) or Megatron's latest_checkpointed_iteration.txt (an iteration, in folder iter_0001000,
// or "release"). Followed once. Also the directory layout that decides a folder's identity.
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "checkpoint/openers/open_checkpoint.h"
#include "checkpoint/openers/dcp_checkpoint.h"
#include "checkpoint/openers/opener.h"
#include "checkpoint/openers/zero_checkpoint.h"

namespace tmorph {

namespace {

namespace fs = std::filesystem;

// The folder a run's pointer file names. None when dir has neither pointer; BadInput when the pointer names
// no folder of dir.
std::optional<std::string> latest_directory(const std::string& dir) {
  for (const char* pointer : {"latest", "latest_checkpointed_iteration.txt"}) {
    const fs::path path = fs::path(dir) / pointer;
    std::error_code ec;
    if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) > 256) continue;
    std::ifstream in(path);
    std::string tag;
    std::getline(in, tag);
    while (!tag.empty() && std::isspace(static_cast<unsigned char>(tag.back()))) tag.pop_back();
    if (std::string(pointer) != "latest" && !tag.empty() && tag.find_first_not_of("0123456789") == std::string::npos) {
      char name[32];
      std::snprintf(name, sizeof name, "iter_%07llu", std::stoull(tag.substr(0, 18)));
      tag = name;
    }
    if (tag.empty() || tag == "." || tag == ".." || tag.find('/') != std::string::npos || !fs::is_directory(fs::path(dir) / tag, ec))
      bad_checkpoint(path.string(), "names '" + tag + "', which is not a checkpoint folder beside it");
    return (fs::path(dir) / tag).string();
  }
  return std::nullopt;
}

bool recognises_latest(const CheckpointProbe& p) {
  const DirectoryFiles& d = p.listing();
  return p.directory() && p.follow_latest() && d.files.empty() && d.torch_indexes.empty() && d.torch_files.empty() &&
         latest_directory(p.path()).has_value();
}
Checkpoint open_latest(const CheckpointProbe& p) { return open_checkpoint_directory(*latest_directory(p.path()), false); }

// The layout of the directory at path; a run folder's is its `latest` pointer and, under the folder it
// names, that folder's layout (followed once, as the latest row does).
std::string directory_layout(const std::string& path, bool follow_latest) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return "";
  const DirectoryFiles d = list_directory(path);
  std::string layout;
  for (const auto* list : {&d.indexes, &d.files, &d.torch_indexes, &d.torch_files})
    for (const auto& f : *list) layout += fs::path(f).filename().string() + "\n";
  if (is_dcp_directory(path)) layout += dcp_layout(path);
  if (layout.empty() && is_zero_directory(path)) layout += zero_layout(path);
  if (layout.empty() && follow_latest) {
    if (const auto latest = latest_directory(path)) {
      const std::string tag = fs::path(*latest).filename().string();
      layout = "latest -> " + tag + "\n";
      std::istringstream inner(directory_layout(*latest, false));
      for (std::string line; std::getline(inner, line);) layout += tag + "/" + line + "\n";
    }
  }
  return layout;
}

}  // namespace

std::string checkpoint_layout(const std::string& path) { return directory_layout(path, true); }

extern const CheckpointOpener kLatestDirectoryOpener{"a run folder with a latest pointer", recognises_latest, open_latest};

}  // namespace tmorph
