// safetensors: one file, every *.safetensors of a directory, or shards through model.safetensors.index.json
// (and pytorch_model.bin.index.json, the same layout for torch.save shards). Groups of tensors that hold one
// packed-quantized tensor (config.json's quantization_config) become that tensor.
#include <filesystem>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/openers/opener.h"
#include "checkpoint/openers/torch_tensor.h"
#include "checkpoint/packed_schemes.h"
#include "core/json_bounded.h"
#include "core/json_file.h"
#include "formats/safetensors.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

namespace fs = std::filesystem;

void add_safetensors(Checkpoint& c, std::shared_ptr<MappedFile> file) {
  const SafetensorsHeader h = parse_safetensors(file->data(), file->size(), file->path());
  c.format = "safetensors";
  for (const auto& [k, v] : h.metadata) c.metadata.emplace(k, v);
  for (const auto& t : h.tensors) {
    CheckpointTensor ct;
    ct.name = t.name;
    ct.stored_type = t.dtype_name;
    ct.dtype = t.dtype;
    if (!t.dtype) ct.unavailable_reason = "no kernel yet for safetensors dtype " + t.dtype_name;
    ct.shape = t.shape;
    ct.elements = t.elements;
    ct.bytes = t.end - t.begin;
    ct.file_offset = t.file_offset;
    ct.file_index = c.files.size();
    c.tensors.push_back(std::move(ct));
  }
  c.files.push_back(std::move(file));
  c.header_bytes.push_back(h.data_offset);
}

// The quantization config beside a safetensors checkpoint: config.json's quantization_config (as
// transformers writes it), else AutoGPTQ's quantize_config.json; each file read becomes a sidecar, so
// the index notices when it changes. Null when there is none.
nlohmann::json quantization_config(Checkpoint& c) {
  const fs::path dir = fs::path(c.files.front()->path()).parent_path();
  for (const char* name : {"config.json", "quantize_config.json"}) {
    const std::string path = (dir / name).string();
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) continue;
    auto doc = read_json_file(path);
    if (!doc) continue;
    c.sidecars.push_back(path);
    if (std::string(name) == "quantize_config.json" && doc->is_object()) return *doc;
    if (doc->is_object() && doc->contains("quantization_config")) {
      const auto& q = (*doc)["quantization_config"];
      if (!q.is_object()) bad_checkpoint(path, "quantization_config is not an object");
      return q;
    }
  }
  return nullptr;
}

Checkpoint with_packed_tensors(Checkpoint c) {
  if (c.format == "safetensors" && !c.files.empty()) recognise_packed_tensors(c, quantization_config(c));
  return c;
}

nlohmann::json read_json(const std::string& path) {
  auto doc = read_json_file(path);
  if (!doc) throw Error(ErrorKind::Io, path + ": cannot open");
  return std::move(*doc);
}

// Sharded safetensors through model.safetensors.index.json, or sharded torch.save files through
// pytorch_model.bin.index.json (the same layout, as transformers writes both): every shard present and
// checked, every weight_map entry in the shard it names, nothing unlisted, total_size equal to the
// tensors' bytes.
Checkpoint open_sharded_index(const std::string& index_path) {
  const bool torch_shards = name_ends_with(index_path, ".bin.index.json");
  const nlohmann::json index = read_json(index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    bad_checkpoint(index_path, "expected an object with a weight_map");
  const fs::path dir = fs::path(index_path).parent_path();
  std::map<std::string, std::string> where;  // tensor -> shard file name
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) bad_checkpoint(index_path, "weight_map['" + tensor + "'] must be a file name");
    where[tensor] = shard.get<std::string>();
    shards.insert(shard.get<std::string>());
  }
  Checkpoint c;
  c.sidecars.push_back(index_path);
  for (const auto& shard : shards) {
    if (shard.find('/') != std::string::npos || shard == "..")
      bad_checkpoint(index_path, "weight_map names shard '" + shard + "' outside the checkpoint's directory");
    const std::string file = (dir / shard).string();
    if (const auto why = missing_path(file)) bad_checkpoint(index_path, "shard " + shard + " (listed in weight_map) is missing" + *why);
    if (torch_shards) add_torch_file(c, std::make_shared<MappedFile>(file));
    else add_safetensors(c, std::make_shared<MappedFile>(file));
  }
  check_unique_names(c);
  uint64_t total = 0;
  for (const auto& t : c.tensors) {
    auto it = where.find(t.name);
    const std::string shard = fs::path(c.files[t.file_index]->path()).filename().string();
    if (it == where.end()) bad_checkpoint(c.files[t.file_index]->path(), "tensor '" + t.name + "' is not in " + index_path + "'s weight_map");
    if (it->second != shard) bad_checkpoint(index_path, "weight_map puts '" + t.name + "' in " + it->second + " but it is in " + shard);
    total += t.bytes;
    where.erase(it);
  }
  if (!where.empty())
    bad_checkpoint(index_path, "weight_map lists '" + where.begin()->first + "' in " + where.begin()->second + ", which does not contain it");
  if (index.contains("metadata") && index["metadata"].contains("total_size")) {
    const auto& ts = index["metadata"]["total_size"];
    if (!ts.is_number_unsigned() || ts.get<uint64_t>() != total)
      bad_checkpoint(index_path, "metadata.total_size is " + json_brief(ts) + ", the shards' tensors hold " + std::to_string(total) + " bytes");
  }
  return with_packed_tensors(std::move(c));
}

bool is_index_file(const CheckpointProbe& p) { return !p.directory() && name_ends_with(p.path(), ".index.json"); }
Checkpoint open_index_file(const CheckpointProbe& p) { return open_sharded_index(p.path()); }

// A safetensors file: an 8-byte header length, then its JSON header.
bool is_safetensors_file(const CheckpointProbe& p) { return !p.directory() && p.file()->size() >= 9 && p.file()->data()[8] == '{'; }
Checkpoint open_safetensors_file(const CheckpointProbe& p) {
  Checkpoint c;
  add_safetensors(c, p.file());
  return with_packed_tensors(std::move(c));
}

bool is_index_directory(const CheckpointProbe& p) { return p.directory() && !p.listing().indexes.empty(); }
Checkpoint open_index_directory(const CheckpointProbe& p) {
  const auto& indexes = p.listing().indexes;
  if (indexes.size() > 1) bad_checkpoint(p.path(), "holds " + std::to_string(indexes.size()) + " *.safetensors.index.json files; name one");
  return open_sharded_index(indexes[0]);
}

bool is_safetensors_directory(const CheckpointProbe& p) { return p.directory() && !p.listing().files.empty(); }
Checkpoint open_safetensors_directory(const CheckpointProbe& p) {
  Checkpoint c;
  for (const auto& f : p.listing().files) add_safetensors(c, std::make_shared<MappedFile>(f));
  check_unique_names(c);
  return with_packed_tensors(std::move(c));
}

bool is_torch_index_directory(const CheckpointProbe& p) {
  return p.directory() && p.listing().files.empty() && !p.listing().torch_indexes.empty();
}
Checkpoint open_torch_index_directory(const CheckpointProbe& p) { return open_sharded_index(p.listing().torch_indexes[0]); }

}  // namespace

extern const CheckpointOpener kShardIndexFileOpener{"*.safetensors.index.json / pytorch_model.bin.index.json", is_index_file, open_index_file};
extern const CheckpointOpener kSafetensorsFileOpener{"safetensors (JSON header at byte 8)", is_safetensors_file, open_safetensors_file};
extern const CheckpointOpener kShardIndexDirectoryOpener{"a folder with a *.safetensors.index.json", is_index_directory, open_index_directory};
extern const CheckpointOpener kSafetensorsDirectoryOpener{"a folder of *.safetensors", is_safetensors_directory, open_safetensors_directory};
extern const CheckpointOpener kTorchIndexDirectoryOpener{"a folder with pytorch_model.bin.index.json", is_torch_index_directory,
                                                         open_torch_index_directory};

}  // namespace tmorph
