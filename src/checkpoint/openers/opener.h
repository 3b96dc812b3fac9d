// The openers' table: one row per checkpoint format (or per way a format is laid out on disk). Opening a
// path (checkpoint/openers/open_checkpoint.h) offers it to each row in order; the first whose `recognises` is true
// opens it. A new format is one file of this folder defining one row, and that row in opener_table.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "core/mapped_file.h"

namespace tmorph {

// The names in a directory that decide which checkpoint it holds, each list sorted: *.safetensors.index.json
// and *.safetensors; transformers' torch.save names, pytorch_model.bin.index.json and pytorch_model*.bin.
struct DirectoryFiles {
  std::vector<std::string> indexes, files, torch_indexes, torch_files;
};
DirectoryFiles list_directory(const std::string& dir);

// What a row looks at. For a file, the mapping is made on first use (name-only rows never map the path,
// so a missing GGUF shard is reported as such); for a directory, its listing is read once.
class CheckpointProbe {
 public:
  CheckpointProbe(std::string path, bool directory, bool follow_latest = true);
  const std::string& path() const { return path_; }
  bool directory() const { return directory_; }
  // A directory's `latest` pointer is followed once: false in the folder it names.
  bool follow_latest() const { return follow_latest_; }
  const DirectoryFiles& listing() const { return listing_; }
  // The file, mapped (files only). Throws Io naming the path when it cannot be opened.
  const std::shared_ptr<MappedFile>& file() const;
  // Whether the file starts with `magic` (files only).
  bool starts_with(const void* magic, size_t size) const;

 private:
  std::string path_;
  bool directory_;
  bool follow_latest_;
  DirectoryFiles listing_;
  mutable std::shared_ptr<MappedFile> file_;
};

struct CheckpointOpener {
  const char* name;  // for people and the error listing what was looked for: "safetensors file", ...
  bool (*recognises)(const CheckpointProbe&);
  Checkpoint (*open)(const CheckpointProbe&);
};

// The rows, in the order they are asked.
const std::vector<const CheckpointOpener*>& checkpoint_openers();

// Opens a directory through the rows that take directories (a `latest` pointer's folder, not followed again).
Checkpoint open_checkpoint_directory(const std::string& dir, bool follow_latest);

// Helpers the rows share.
[[noreturn]] void bad_checkpoint(const std::string& path, const std::string& what);  // BadInput "path: what"
// Empty when path exists; else why not: "" when it simply does not, " (File name too long)" and the like.
std::optional<std::string> missing_path(const std::string& path);
// Tensor names must be unique across the whole checkpoint (BadInput naming both files).
void check_unique_names(const Checkpoint& c);
bool name_ends_with(const std::string& s, const std::string& suffix);

}  // namespace tmorph
