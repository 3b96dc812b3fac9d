// GGUF: one file (magic "GGUF"), or a split set NAME-0000i-of-0000N.gguf opened from any of its shards.
#include <cctype>
#include <cstdio>

#include "checkpoint/openers/opener.h"
#include "core/utf8.h"
#include "formats/gguf.h"

namespace tmorph {

namespace {

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
    if (!ct.dtype) ct.storage = GgmlBlockStorage{t.type->id};  // a block format: its values come from dequantization
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

uint64_t kv_uint(const GgufFile& g, const std::string& key, const std::string& path) {
  const GgufKv* kv = g.find(key);
  if (kv && kv->value.is_number_unsigned()) return kv->value.get<uint64_t>();
  if (!kv || !kv->value.is_number_integer() || kv->value.get<int64_t>() < 0)
    bad_checkpoint(path, "split set: " + key + " is missing or not a non-negative integer");
  return static_cast<uint64_t>(kv->value.get<int64_t>());
}

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
    bad_checkpoint(path, "split shard number " + std::to_string(number) + " of " + std::to_string(count) +
                             " is outside the set (shards are numbered 1.." + std::to_string(count) + ")");
  Checkpoint c;
  uint64_t declared_tensors = 0;
  for (int i = 1; i <= count; ++i) {
    char suffix[64];
    std::snprintf(suffix, sizeof suffix, "-%05d-of-%05d.gguf", i, count);
    const std::string shard = prefix + suffix;
    if (const auto why = missing_path(shard))
      bad_checkpoint(path, "split set of " + std::to_string(count) + " shards: shard " + shard + " is missing" + *why);
    const GgufFile g = add_gguf(c, std::make_shared<MappedFile>(shard));
    const uint64_t no = kv_uint(g, "split.no", shard), n = kv_uint(g, "split.count", shard);
    if (no != static_cast<uint64_t>(i - 1) || n != static_cast<uint64_t>(count))
      bad_checkpoint(shard, "split.no " + std::to_string(no) + " / split.count " + std::to_string(n) +
                                " disagree with the file name (shard " + std::to_string(i) + " of " + std::to_string(count) + ")");
    if (i == 1) declared_tensors = kv_uint(g, "split.tensors.count", shard);
    else if (g.find("split.tensors.count") && kv_uint(g, "split.tensors.count", shard) != declared_tensors)
      bad_checkpoint(shard, "split.tensors.count " + std::to_string(kv_uint(g, "split.tensors.count", shard)) +
                                " disagrees with the first shard's " + std::to_string(declared_tensors));
  }
  check_unique_names(c);
  if (declared_tensors != c.tensors.size())
    bad_checkpoint(path, "split set declares " + std::to_string(declared_tensors) + " tensors (split.tensors.count), its shards hold " +
                             std::to_string(c.tensors.size()));
  c.metadata.erase("split.no");
  return c;
}

bool is_split_shard(const CheckpointProbe& p) { return !p.directory() && split_name(p.path()).has_value(); }
Checkpoint open_split_shard(const CheckpointProbe& p) { return open_gguf_split(p.path(), *split_name(p.path())); }

bool is_gguf_file(const CheckpointProbe& p) { return p.starts_with("GGUF", 4); }
Checkpoint open_gguf_file(const CheckpointProbe& p) {
  Checkpoint c;
  add_gguf(c, p.file());
  return c;
}

}  // namespace

extern const CheckpointOpener kGgufSplitOpener{"a GGUF split shard (NAME-0000i-of-0000N.gguf)", is_split_shard, open_split_shard};
extern const CheckpointOpener kGgufFileOpener{"GGUF (magic 'GGUF')", is_gguf_file, open_gguf_file};

}  // namespace tmorph
