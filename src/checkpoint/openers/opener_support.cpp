#include "checkpoint/openers/opener.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include "tensormorph/error.h"

namespace tmorph {

namespace fs = std::filesystem;

DirectoryFiles list_directory(const std::string& dir) {
  DirectoryFiles d;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name_ends_with(name, ".safetensors.index.json")) d.indexes.push_back(e.path().string());
    else if (name_ends_with(name, ".safetensors")) d.files.push_back(e.path().string());
    else if (name == "pytorch_model.bin.index.json") d.torch_indexes.push_back(e.path().string());
    else if (name.rfind("pytorch_model", 0) == 0 && name_ends_with(name, ".bin")) d.torch_files.push_back(e.path().string());
  }
  for (auto* list : {&d.indexes, &d.files, &d.torch_indexes, &d.torch_files}) std::sort(list->begin(), list->end());
  return d;
}

CheckpointProbe::CheckpointProbe(std::string path, bool directory, bool follow_latest)
    : path_(std::move(path)), directory_(directory), follow_latest_(follow_latest) {
  if (directory_) listing_ = list_directory(path_);
}

const std::shared_ptr<MappedFile>& CheckpointProbe::file() const {
  if (!file_) file_ = std::make_shared<MappedFile>(path_);
  return file_;
}

bool CheckpointProbe::starts_with(const void* magic, size_t size) const {
  if (directory_) return false;
  const auto& f = file();
  return f->size() >= size && std::memcmp(f->data(), magic, size) == 0;
}

void bad_checkpoint(const std::string& path, const std::string& what) { throw Error(ErrorKind::BadInput, path + ": " + what); }

std::optional<std::string> missing_path(const std::string& path) {
  std::error_code ec;
  if (fs::exists(path, ec)) return std::nullopt;
  return ec ? " (" + ec.message() + ")" : std::string();
}

void check_unique_names(const Checkpoint& c) {
  std::map<std::string, size_t> seen;
  for (const auto& t : c.tensors) {
    auto [it, fresh] = seen.emplace(t.name, t.file_index);
    if (!fresh)
      bad_checkpoint(c.files[t.file_index]->path(), "tensor '" + t.name + "' is also in " + c.files[it->second]->path());
  }
}

bool name_ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace tmorph
