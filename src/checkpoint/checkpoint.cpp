#include "checkpoint/checkpoint.h"

#include <cstdio>
#include <cctype>
#include <cstring>
#include <fstream>
#include <sstream>
#include <optional>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint/dcp_checkpoint.h"
#include "checkpoint/megatron_checkpoint.h"
#include "checkpoint/zero_checkpoint.h"
#include "checkpoint/torch_tensor.h"
#include "checkpoint/packed_schemes.h"
#include "core/format.h"
#include "core/json_bounded.h"
#include "core/json_file.h"
#include "core/path_kind.h"
#include "core/utf8.h"
#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "formats/torch_save.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::BadInput, path + ": " + what);
}

// Adds one safetensors file's tensors to c.
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

// Adds one GGUF file's tensors to c; returns its header for the split-set checks.
GgufFile add_gguf(Checkpoint& c, std::shared_ptr<MappedFile> file) {
  GgufFile g = parse_gguf(file->data(), file->size(), file->path(), GgufArrays::Summary);
  c.format = "gguf";
  for (const auto& kv : g.kvs)
    if (kv.type != GgufType::ARRAY)  // shown and written as JSON: strings made UTF-8
      c.metadata.emplace(kv.key, kv.value.is_string() ? escape_invalid_utf8(kv.value.get<std::string>()) : kv.value.dump());
  for (const auto& t : g.tensors) {
    CheckpointTensor ct;
    ct.name = t.name;
    ct.stored_type = t.type->name;
    ct.dtype = t.type->dense;
    if (!ct.dtype) ct.ggml_type = t.type->id;  // a block format: its values come from dequantization
    ct.shape = t.shape;
    ct.ne = t.ne;
    ct.elements = t.elements;
    ct.bytes = t.bytes;
    ct.file_offset = t.data_offset;
    ct.file_index = c.files.size();
    c.tensors.push_back(std::move(ct));
  }
  c.files.push_back(std::move(file));
  c.header_bytes.push_back(g.data_section_offset);
  return g;
}


// Adds one torch.save file's tensors to c (torch_checkpoint_tensor).
void add_torch(Checkpoint& c, std::shared_ptr<MappedFile> file) {
  const TorchSaveFile f = parse_torch_save(file->data(), file->size(), file->path());
  c.format = "torch";
  for (const auto& [k, v] : f.metadata) c.metadata.emplace(k, v);
  for (const auto& t : f.tensors) c.tensors.push_back(torch_checkpoint_tensor(f, t, c.files.size(), file->size()));
  c.files.push_back(std::move(file));
  c.header_bytes.push_back(f.header_bytes);
}

// Empty when path exists; else why not: "" when it simply does not, " (File name too long)" and the like
// when the file system refuses the name (a name from a file may be anything).
std::optional<std::string> missing(const std::string& path) {
  std::error_code ec;
  if (fs::exists(path, ec)) return std::nullopt;
  return ec ? " (" + ec.message() + ")" : std::string();
}

// Tensor names must be unique across the whole checkpoint.
void check_unique(const Checkpoint& c) {
  std::map<std::string, size_t> seen;
  for (const auto& t : c.tensors) {
    auto [it, fresh] = seen.emplace(t.name, t.file_index);
    if (!fresh)
      bad(c.files[t.file_index]->path(), "tensor '" + t.name + "' is also in " + c.files[it->second]->path());
  }
}

uint64_t kv_uint(const GgufFile& g, const std::string& key, const std::string& path) {
  const GgufKv* kv = g.find(key);
  if (kv && kv->value.is_number_unsigned()) return kv->value.get<uint64_t>();
  if (!kv || !kv->value.is_number_integer() || kv->value.get<int64_t>() < 0)
    bad(path, "split set: " + key + " is missing or not a non-negative integer");
  return static_cast<uint64_t>(kv->value.get<int64_t>());
}

// A GGUF split set NAME-00001-of-0000N.gguf, opened from any of its shards.
// A split-set shard name: PREFIX-NNNNN-of-MMMMM.gguf (five digits each, as gguf-split writes them).
struct SplitName {
  std::string prefix;
  int number = 0, count = 0;
};

std::optional<SplitName> split_name(const std::string& path) {
  static const std::string kTail = "-00000-of-00000.gguf";  // the shape of the suffix
  if (path.size() <= kTail.size()) return std::nullopt;
  const std::string tail = path.substr(path.size() - kTail.size());
  for (size_t i = 0; i < kTail.size(); ++i) {
    const bool digit_here = kTail[i] == '0';
    if (digit_here ? !std::isdigit(static_cast<unsigned char>(tail[i])) : tail[i] != kTail[i]) return std::nullopt;
  }
  return SplitName{path.substr(0, path.size() - kTail.size()), std::stoi(tail.substr(1, 5)), std::stoi(tail.substr(10, 5))};
}

Checkpoint open_gguf_split(const std::string& path, const SplitName& name) {
  const std::string& prefix = name.prefix;
  const int number = name.number, count = name.count;
  if (count < 1 || number < 1 || number > count)
    bad(path, "split shard number " + std::to_string(number) + " of " + std::to_string(count) +
                  " is outside the set (shards are numbered 1.." + std::to_string(count) + ")");
  Checkpoint c;
  uint64_t declared_tensors = 0;
  for (int i = 1; i <= count; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "-%05d-of-%05d.gguf", i, count);
    const std::string shard = prefix + name;
    if (const auto why = missing(shard)) bad(path, "split set of " + std::to_string(count) + " shards: shard " + shard + " is missing" + *why);
    const GgufFile g = add_gguf(c, std::make_shared<MappedFile>(shard));
    const uint64_t no = kv_uint(g, "split.no", shard), n = kv_uint(g, "split.count", shard);
    if (no != static_cast<uint64_t>(i - 1) || n != static_cast<uint64_t>(count))
      bad(shard, "split.no " + std::to_string(no) + " / split.count " + std::to_string(n) + " disagree with the file name (shard " +
                     std::to_string(i) + " of " + std::to_string(count) + ")");
    if (i == 1) declared_tensors = kv_uint(g, "split.tensors.count", shard);
    else if (g.find("split.tensors.count") && kv_uint(g, "split.tensors.count", shard) != declared_tensors)
      bad(shard, "split.tensors.count " + std::to_string(kv_uint(g, "split.tensors.count", shard)) +
                     " disagrees with the first shard's " + std::to_string(declared_tensors));
  }
  check_unique(c);
  if (declared_tensors != c.tensors.size())
    bad(path, "split set declares " + std::to_string(declared_tensors) + " tensors (split.tensors.count), its shards hold " +
                  std::to_string(c.tensors.size()));
  c.metadata.erase("split.no");
  return c;
}

nlohmann::json read_json(const std::string& path) {
  auto doc = read_json_file(path);
  if (!doc) throw Error(ErrorKind::Io, path + ": cannot open");
  return std::move(*doc);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() > suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Sharded safetensors through model.safetensors.index.json, or sharded torch.save files through
// pytorch_model.bin.index.json (the same layout, as transformers writes both): every shard present and
// checked, every weight_map entry in the shard it names, nothing unlisted, total_size equal to the
// tensors' bytes.
Checkpoint open_safetensors_index(const std::string& index_path) {
  const bool torch_shards = ends_with(index_path, ".bin.index.json");
  const nlohmann::json index = read_json(index_path);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    bad(index_path, "expected an object with a weight_map");
  const fs::path dir = fs::path(index_path).parent_path();
  std::map<std::string, std::string> where;  // tensor -> shard file name
  std::set<std::string> shards;
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) bad(index_path, "weight_map['" + tensor + "'] must be a file name");
    where[tensor] = shard.get<std::string>();
    shards.insert(shard.get<std::string>());
  }
  Checkpoint c;
  c.sidecars.push_back(index_path);
  for (const auto& shard : shards) {
    if (shard.find('/') != std::string::npos || shard == "..")
      bad(index_path, "weight_map names shard '" + shard + "' outside the checkpoint's directory");
    const std::string file = (dir / shard).string();
    if (const auto why = missing(file)) bad(index_path, "shard " + shard + " (listed in weight_map) is missing" + *why);
    if (torch_shards) add_torch(c, std::make_shared<MappedFile>(file));
    else add_safetensors(c, std::make_shared<MappedFile>(file));
  }
  check_unique(c);
  uint64_t total = 0;
  for (const auto& t : c.tensors) {
    auto it = where.find(t.name);
    const std::string shard = fs::path(c.files[t.file_index]->path()).filename().string();
    if (it == where.end()) bad(c.files[t.file_index]->path(), "tensor '" + t.name + "' is not in " + index_path + "'s weight_map");
    if (it->second != shard) bad(index_path, "weight_map puts '" + t.name + "' in " + it->second + " but it is in " + shard);
    total += t.bytes;
    where.erase(it);
  }
  if (!where.empty())
    bad(index_path, "weight_map lists '" + where.begin()->first + "' in " + where.begin()->second + ", which does not contain it");
  if (index.contains("metadata") && index["metadata"].contains("total_size")) {
    const auto& ts = index["metadata"]["total_size"];
    if (!ts.is_number_unsigned() || ts.get<uint64_t>() != total)
      bad(index_path, "metadata.total_size is " + json_brief(ts) + ", the shards' tensors hold " + std::to_string(total) + " bytes");
  }
  return c;
}

// The checkpoint files of a directory, each list sorted: *.safetensors.index.json and *.safetensors;
// transformers' torch.save names, pytorch_model.bin.index.json and pytorch_model*.bin.
struct DirectoryFiles {
  std::vector<std::string> indexes, files, torch_indexes, torch_files;
};

DirectoryFiles list_directory(const std::string& dir) {
  DirectoryFiles d;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (ends_with(name, ".safetensors.index.json")) d.indexes.push_back(e.path().string());
    else if (ends_with(name, ".safetensors")) d.files.push_back(e.path().string());
    else if (name == "pytorch_model.bin.index.json") d.torch_indexes.push_back(e.path().string());
    else if (name.rfind("pytorch_model", 0) == 0 && ends_with(name, ".bin")) d.torch_files.push_back(e.path().string());
  }
  for (auto* list : {&d.indexes, &d.files, &d.torch_indexes, &d.torch_files}) std::sort(list->begin(), list->end());
  return d;
}

// The folder a training run's pointer file names: DeepSpeed's `latest` (a tag, e.g. global_step1000) or
// Megatron's latest_checkpointed_iteration.txt (an iteration, in folder iter_0001000, or "release").
// None when dir has neither; BadInput when the pointer names no folder of dir.
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
      bad(path.string(), "names '" + tag + "', which is not a checkpoint folder beside it");
    return (fs::path(dir) / tag).string();
  }
  return std::nullopt;
}

// A directory: its *.safetensors.index.json when there is one, else every *.safetensors in it; without
// safetensors, a Megatron torch_dist or DCP folder, pytorch_model.bin.index.json, a lone pytorch_model.bin,
// a DeepSpeed ZeRO folder, else the folder a `latest` pointer names.
Checkpoint open_directory(const std::string& dir, bool follow_latest = true) {
  const DirectoryFiles d = list_directory(dir);
  const auto& indexes = d.indexes;
  const auto& files = d.files;
  if (indexes.size() > 1) bad(dir, "holds " + std::to_string(indexes.size()) + " *.safetensors.index.json files; name one");
  if (indexes.size() == 1) return open_safetensors_index(indexes[0]);
  if (files.empty() && is_megatron_directory(dir)) return open_megatron(dir);
  if (files.empty() && is_dcp_directory(dir)) return open_dcp(dir);
  if (files.empty() && d.torch_indexes.empty() && d.torch_files.empty()) {
    if (is_zero_directory(dir)) return open_zero(dir);
    if (const auto latest = follow_latest ? latest_directory(dir) : std::nullopt) return open_directory(*latest, false);
  }
  if (files.empty() && !d.torch_indexes.empty()) return open_safetensors_index(d.torch_indexes[0]);
  if (files.empty() && d.torch_files.size() == 1) {
    Checkpoint c;
    add_torch(c, std::make_shared<MappedFile>(d.torch_files[0]));
    check_unique(c);
    return c;
  }
  if (files.empty() && d.torch_files.size() > 1)
    bad(dir, "holds " + std::to_string(d.torch_files.size()) + " pytorch_model*.bin files but no pytorch_model.bin.index.json");
  if (files.empty())
    bad(dir, "holds no *.safetensors file, no *.safetensors.index.json, no pytorch_model.bin, no DCP .metadata, no DeepSpeed "
             "*_model_states.pt + *_optim_states.pt and no latest pointer");
  Checkpoint c;
  for (const auto& f : files) add_safetensors(c, std::make_shared<MappedFile>(f));
  check_unique(c);
  return c;
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
      if (!q.is_object()) bad(path, "quantization_config is not an object");
      return q;
    }
  }
  return nullptr;
}

// Safetensors checkpoints: groups of tensors that hold one packed tensor become that tensor.
Checkpoint with_packed_tensors(Checkpoint c) {
  if (c.format == "safetensors" && !c.files.empty()) recognise_packed_tensors(c, quantization_config(c));
  return c;
}

}  // namespace

namespace {

// The layout of the directory at path; a run folder's is its `latest` pointer and, under the folder it
// names, that folder's layout (followed once, as open_directory does).
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

Checkpoint open_checkpoint(const std::string& path) {
  if (path_kind(path) == PathKind::Directory) return with_packed_tensors(open_directory(path));
  if (path.size() > 11 && path.substr(path.size() - 11) == ".index.json") return with_packed_tensors(open_safetensors_index(path));
  if (const auto name = split_name(path)) return open_gguf_split(path, *name);
  auto file = std::make_shared<MappedFile>(path);
  Checkpoint c;
  if (file->size() >= 4 && std::memcmp(file->data(), "GGUF", 4) == 0) {
    add_gguf(c, std::move(file));
    return c;
  }
  if (file->size() >= 9 && file->data()[8] == '{') {
    add_safetensors(c, std::move(file));
    return with_packed_tensors(std::move(c));
  }
  if (looks_like_torch_zip(file->data(), file->size()) || looks_like_legacy_torch(file->data(), file->size())) {
    add_torch(c, std::move(file));
    check_unique(c);
    return c;
  }
  throw Error(ErrorKind::BadInput, path + ": neither GGUF (magic 'GGUF'), safetensors (JSON header at byte 8) nor torch.save (zip); "
                                          "for a raw tensor use --raw with --dtype and --shape");
}

}  // namespace tmorph
