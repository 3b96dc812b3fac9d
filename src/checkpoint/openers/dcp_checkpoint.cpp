#include "checkpoint/openers/dcp_checkpoint.h"
#include "checkpoint/openers/opener.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>

#include "core/format.h"
#include "core/utf8.h"
#include "formats/dcp.h"
#include "formats/torch_save.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace fs = std::filesystem;

namespace {

// Pairwise overlap checks cost chunks^2; a tensor in more chunks than this is listed unreadable.
constexpr size_t kMaxChunks = 4096;

bool boxes_overlap(const TensorChunk& a, const TensorChunk& b) {
  for (size_t d = 0; d < a.offsets.size(); ++d)
    if (!(a.offsets[d] < b.offsets[d] + b.sizes[d] && b.offsets[d] < a.offsets[d] + a.sizes[d])) return false;
  return true;
}

uint64_t product(const std::vector<uint64_t>& v) {
  uint64_t n = 1;
  for (uint64_t x : v) n = (x != 0 && n > UINT64_MAX / x) ? UINT64_MAX : n * x;
  return n;
}

class Assembler {
 public:
  Assembler(const std::string& dir, Checkpoint& c) : dir_(dir), c_(c) {}

  // The files index of dir/relative, opened once; empty (with the reason kept) when it cannot be.
  std::optional<size_t> file(const std::string& relative) {
    if (relative.empty() || relative == "." || relative == ".." || relative.find('/') != std::string::npos)
      throw Error(ErrorKind::BadInput, escape_invalid_utf8(dir_ + "/.metadata: storage file '" + relative + "' is not a file name inside the checkpoint's directory"));
    if (auto it = index_.find(relative); it != index_.end()) return it->second;
    if (failed_.count(relative)) return std::nullopt;
    try {
      c_.files.push_back(std::make_shared<MappedFile>((fs::path(dir_) / relative).string()));
      c_.header_bytes.push_back(0);
    } catch (const Error& e) {
      failed_[relative] = e.what();
      return std::nullopt;
    }
    return index_[relative] = c_.files.size() - 1;
  }

  std::string failure(const std::string& relative) const { return failed_.at(relative); }

  // The torch.save archive at storage s, or the reason it cannot be read.
  std::optional<TorchSaveFile> archive(const DcpStorage& s, size_t* file_index, std::string* why) {
    const auto f = file(s.relative_path);
    if (!f) {
      *why = "its file " + s.relative_path + " cannot be read (" + failure(s.relative_path) + ")";
      return std::nullopt;
    }
    const MappedFile& m = *c_.files[*f];
    if (s.offset > m.size() || s.length > m.size() - s.offset) {
      *why = "bytes [" + std::to_string(s.offset) + ", " + std::to_string(s.offset + s.length) + ") of " + s.relative_path +
             " run past its end (" + std::to_string(m.size()) + " bytes)";
      return std::nullopt;
    }
    try {
      TorchSaveFile t = parse_torch_save(m.data() + s.offset, s.length, m.path() + " bytes [" + std::to_string(s.offset) + ", " +
                                                                             std::to_string(s.offset + s.length) + ")");
      // A file's identity covers its first archive's header (as a torch.save file's does).
      if (c_.header_bytes[*f] == 0 || s.offset < first_archive_[*f])
        first_archive_[*f] = s.offset, c_.header_bytes[*f] = s.offset + t.header_bytes;
      *file_index = *f;
      return t;
    } catch (const Error& e) {
      *why = e.what();
      return std::nullopt;
    }
  }

  // The tensor's chunks (into `chunks`, sorted by offsets), checked to tile it; the reason when they do not.
  std::string assemble(const DcpTensor& dt, uint64_t elements, std::vector<TensorChunk>& chunks) {
    if (!dt.type->kernel_dtype) return std::string("no kernel yet for torch ") + dt.type->dtype;
    if (dt.chunks.size() > kMaxChunks)
      return "stored in " + std::to_string(dt.chunks.size()) + " chunks (at most " + std::to_string(kMaxChunks) + " are read)";
    const uint32_t width = dt.type->bytes;
    uint64_t covered = 0;
    for (const auto& ch : dt.chunks) {
      const std::string at = "its chunk at offsets " + dims_text(ch.offsets) + " (sizes " + dims_text(ch.sizes) + ")";
      for (size_t d = 0; d < dt.size.size(); ++d)
        if (ch.offsets[d] > dt.size[d] || ch.sizes[d] > dt.size[d] - ch.offsets[d])
          return at + " lies outside the tensor's shape " + dims_text(dt.size);
      size_t f = 0;
      std::string why;
      const auto a = archive(ch.storage, &f, &why);
      if (!a) return at + ": " + why;
      if (a->tensors.size() != 1) return at + ": its archive holds " + std::to_string(a->tensors.size()) + " tensors, not one";
      const TorchTensorView& v = a->tensors[0];
      const TorchStorage& s = a->storages[v.storage];
      if (s.stored_type != dt.type->stored_type) return at + ": stored as " + s.stored_type + ", the metadata says " + dt.type->stored_type;
      if (v.shape != ch.sizes) return at + ": its archive's tensor has shape " + dims_text(v.shape);
      if (!v.contiguous) return at + ": its archive's tensor is a strided view (strides " + dims_text(v.strides) + ")";
      TensorChunk tc;
      tc.file_index = f;
      tc.file_offset = ch.storage.offset + s.file_offset + (v.elements ? v.storage_offset * width : 0);
      tc.offsets = ch.offsets;
      tc.sizes = ch.sizes;
      covered += v.elements;
      chunks.push_back(std::move(tc));
    }
    std::sort(chunks.begin(), chunks.end(), [](const TensorChunk& a, const TensorChunk& b) { return a.offsets < b.offsets; });
    // Empty chunks (and a scalar's, which has no dimensions to compare) overlap nothing.
    std::vector<bool> holds(chunks.size());
    for (size_t i = 0; i < chunks.size(); ++i) holds[i] = !chunks[i].sizes.empty() && product(chunks[i].sizes) != 0;
    for (size_t i = 0; i < chunks.size(); ++i)
      for (size_t j = i + 1; j < chunks.size(); ++j)
        if (holds[i] && holds[j] && boxes_overlap(chunks[i], chunks[j]))
          return "its chunks at offsets " + dims_text(chunks[i].offsets) + " and " + dims_text(chunks[j].offsets) + " overlap";
    if (covered != elements)
      return "its chunks hold " + std::to_string(covered) + " of its " + std::to_string(elements) + " elements (chunks missing)";
    return "";
  }

 private:
  const std::string& dir_;
  Checkpoint& c_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> failed_;
  std::map<size_t, uint64_t> first_archive_;
};

}  // namespace

bool is_dcp_directory(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / ".metadata", ec);
}

std::string dcp_layout(const std::string& dir) {
  std::vector<std::string> names = {".metadata"};
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 7 && name.substr(name.size() - 7) == ".distcp") names.push_back(name);
  }
  std::sort(names.begin() + 1, names.end());
  std::string layout;
  for (const auto& n : names) layout += n + "\n";
  return layout;
}

Checkpoint open_dcp(const std::string& dir) {
  const std::string meta_path = (fs::path(dir) / ".metadata").string();
  const MappedFile meta(meta_path);
  const DcpMetadata m = parse_dcp_metadata(meta.data(), meta.size(), meta_path);
  Checkpoint c;
  c.format = "dcp";
  c.sidecars.push_back(meta_path);
  Assembler files(dir, c);
  for (const auto& [name, storage] : m.byte_entries) {
    size_t f = 0;
    std::string why;
    const auto a = files.archive(storage, &f, &why);
    c.metadata[name] = !a ? "(unreadable: " + why + ")" : a->scalar ? *a->scalar : "(an object of " + std::to_string(storage.length) + " bytes)";
  }
  for (const auto& dt : m.tensors) {
    CheckpointTensor t;
    t.name = dt.name;
    t.stored_type = dt.type->stored_type;
    t.shape = dt.size;
    t.elements = product(dt.size);
    if (t.elements == UINT64_MAX || t.elements > UINT64_MAX / dt.type->bytes)
      throw Error(ErrorKind::BadInput, escape_invalid_utf8(meta_path + ": tensor '" + dt.name + "' of shape " + dims_text(dt.size) + ": its size overflows 64 bits"));
    t.bytes = t.elements * dt.type->bytes;
    std::vector<TensorChunk> chunks;
    const std::string why = files.assemble(dt, t.elements, chunks);
    if (!why.empty()) {
      t.unavailable_reason = why;
      t.damaged = true;  // a storage file missing, unreadable or too short for its chunks
    } else {
      t.dtype = dt.type->kernel_dtype;
      if (!chunks.empty()) {
        t.file_index = chunks.front().file_index, t.file_offset = chunks.front().file_offset;
        t.storage = ChunkedStorage{std::move(chunks)};
      }
    }
    c.tensors.push_back(std::move(t));
  }
  if (c.files.empty()) throw Error(ErrorKind::BadInput, escape_invalid_utf8(dir + ": a DCP checkpoint none of whose storage files could be read"));
  return c;
}

namespace {
bool recognises_dcp(const CheckpointProbe& p) { return p.directory() && p.listing().files.empty() && is_dcp_directory(p.path()); }
Checkpoint open_dcp_probe(const CheckpointProbe& p) { return open_dcp(p.path()); }
}  // namespace

extern const CheckpointOpener kDcpDirectoryOpener{"a Distributed Checkpoint folder (.metadata + *.distcp)", recognises_dcp, open_dcp_probe};

}  // namespace tmorph
