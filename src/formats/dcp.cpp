#include "formats/dcp.h"

#include <map>

#include "core/format.h"
#include "core/utf8.h"
#include "formats/pickle_reader.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

// The DCP classes under torch 1.13's module path and under torch >= 2.0's.
const char* const kMetadataModules[] = {"torch.distributed._shard.checkpoint.metadata", "torch.distributed.checkpoint.metadata"};
const char* const kPropertiesModules[] = {"torch.distributed._shard.sharded_tensor.metadata", "torch.distributed.checkpoint.metadata"};
const char* const kFilesystemModules[] = {"torch.distributed._shard.checkpoint.filesystem", "torch.distributed.checkpoint.filesystem"};

// The class name of a global ("a.b.Metadata" -> "Metadata").
std::string class_of(const PickleValue& g) {
  const size_t dot = g.text.rfind('.');
  return dot == std::string::npos ? g.text : g.text.substr(dot + 1);
}

class DcpReader {
 public:
  explicit DcpReader(const std::string& path) : path_(path) {}

  DcpMetadata read(const PickleValue& root) {
    const auto& state = object(root, "Metadata", "the metadata");
    const PickleValue* sdm = field(state, "state_dict_metadata");
    const PickleValue* storage = field(state, "storage_data");
    if (!sdm || sdm->kind != PickleKind::Dict) fail(root.offset, "Metadata has no state_dict_metadata dict");
    if (!storage || storage->kind != PickleKind::Dict) fail(root.offset, "Metadata has no storage_data dict (not written by FileSystemWriter?)");
    // (name, chunk offsets) -> storage.
    std::map<std::pair<std::string, std::vector<uint64_t>>, DcpStorage> where;
    for (const auto& [k, v] : storage->entries) {
      const auto& key = object(*k, "MetadataIndex", "a storage_data key");
      const PickleValue* fqn = field(key, "fqn");
      if (!fqn || fqn->kind != PickleKind::Str) fail(k->offset, "MetadataIndex without an fqn string");
      const PickleValue* off = field(key, "offset");
      std::vector<uint64_t> offsets = off && off->kind != PickleKind::None ? size_of(*off, "MetadataIndex offset") : std::vector<uint64_t>{};
      const auto& info = object(*v, "_StorageInfo", "a storage_data value");
      DcpStorage s;
      const PickleValue* rel = field(info, "relative_path");
      if (!rel || rel->kind != PickleKind::Str) fail(v->offset, "_StorageInfo without a relative_path string");
      s.relative_path = rel->text;
      s.offset = integer(field(info, "offset"), v->offset, "_StorageInfo offset");
      s.length = integer(field(info, "length"), v->offset, "_StorageInfo length");
      if (!where.emplace(std::make_pair(fqn->text, offsets), s).second)
        fail(k->offset, "storage_data names '" + fqn->text + "' at offsets " + dims_text(offsets) + " twice");
    }
    DcpMetadata out;
    for (const auto& [k, v] : sdm->entries) {
      if (k->kind != PickleKind::Str) fail(k->offset, "a state_dict_metadata key is not a string");
      const std::string& name = k->text;
      const PickleValue& inner = unwrap(*v);
      const std::string cls = inner.kind == PickleKind::Reduce ? class_of(*inner.items[0]) : "";
      if (cls == "BytesStorageMetadata") {
        auto it = where.find({name, {}});
        if (it == where.end()) fail(v->offset, "bytes entry '" + name + "' has no storage_data entry");
        out.byte_entries.emplace_back(name, it->second);
        continue;
      }
      const auto& tsm = object(*v, "TensorStorageMetadata", "entry '" + name + "'");
      DcpTensor t;
      t.name = name;
      t.type = element_type(field(tsm, "properties"), v->offset, name);
      const PickleValue* size = field(tsm, "size");
      if (!size) fail(v->offset, "entry '" + name + "' has no size");
      t.size = size_of(*size, "entry '" + name + "' size");
      const PickleValue* chunks = field(tsm, "chunks");
      if (!chunks || chunks->kind != PickleKind::List) fail(v->offset, "entry '" + name + "' has no chunks list");
      for (const auto& c : chunks->items) {
        const auto& cs = object(*c, "ChunkStorageMetadata", "a chunk of '" + name + "'");
        DcpChunk chunk;
        const PickleValue* o = field(cs, "offsets");
        const PickleValue* z = field(cs, "sizes");
        if (!o || !z) fail(c->offset, "a chunk of '" + name + "' without offsets and sizes");
        chunk.offsets = size_of(*o, "chunk offsets of '" + name + "'");
        chunk.sizes = size_of(*z, "chunk sizes of '" + name + "'");
        if (chunk.offsets.size() != t.size.size() || chunk.sizes.size() != t.size.size())
          fail(c->offset, "a chunk of '" + name + "' has " + std::to_string(chunk.offsets.size()) + " offsets and " +
                              std::to_string(chunk.sizes.size()) + " sizes for a tensor of rank " + std::to_string(t.size.size()));
        auto it = where.find({name, chunk.offsets});
        if (it == where.end()) fail(c->offset, "the chunk of '" + name + "' at offsets " + dims_text(chunk.offsets) + " has no storage_data entry");
        chunk.storage = it->second;
        t.chunks.push_back(std::move(chunk));
      }
      out.tensors.push_back(std::move(t));
    }
    return out;
  }

 private:
  const std::string& path_;

  [[noreturn]] void fail(uint64_t offset, const std::string& what) const {
    throw Error(ErrorKind::BadInput, escape_invalid_utf8(path_ + " byte " + std::to_string(offset) + ": " + what));
  }

  // A Build of a NEWOBJ/REDUCE of a DCP class, or the bare NEWOBJ: the call node.
  static const PickleValue& unwrap(const PickleValue& v) { return v.kind == PickleKind::Build ? *v.items[0] : v; }

  // The state of an instance of `cls` (a dict for dataclasses; the empty dict when it has none).
  const PickleValue& object(const PickleValue& v, const std::string& cls, const std::string& what) const {
    static const PickleValue kEmpty = [] {
      PickleValue d;
      d.kind = PickleKind::Dict;
      return d;
    }();
    const PickleValue& call = unwrap(v);
    if (call.kind != PickleKind::Reduce || class_of(*call.items[0]) != cls)
      fail(v.offset, what + ": expected a " + cls + ", found a " +
                         (call.kind == PickleKind::Reduce ? call.items[0]->text : std::string(pickle_kind_name(call.kind))));
    if (v.kind != PickleKind::Build) return kEmpty;
    const PickleValue& state = *v.items[1];
    if (state.kind == PickleKind::Dict) return state;
    // (None, {slots}) for classes with __slots__.
    if (state.kind == PickleKind::Tuple && state.items.size() == 2 && state.items[1]->kind == PickleKind::Dict) return *state.items[1];
    if (state.kind == PickleKind::Tuple && state.items.size() == 2 && state.items[0]->kind == PickleKind::Dict) return *state.items[0];
    fail(state.offset, what + ": a " + cls + " whose state is a " + pickle_kind_name(state.kind));
  }

  static const PickleValue* field(const PickleValue& dict, const std::string& name) {
    for (const auto& [k, v] : dict.entries)
      if (k->kind == PickleKind::Str && k->text == name) return v.get();
    return nullptr;
  }

  uint64_t integer(const PickleValue* v, uint64_t at, const std::string& what) const {
    if (!v || v->kind != PickleKind::Int || v->integer < 0) fail(v ? v->offset : at, what + ": expected a non-negative int");
    return static_cast<uint64_t>(v->integer);
  }

  // torch.Size((a, b, ...)) (a REDUCE of torch.Size), or a plain tuple or list of ints.
  std::vector<uint64_t> size_of(const PickleValue& v, const std::string& what) const {
    const PickleValue* seq = &v;
    if (v.kind == PickleKind::Reduce) {
      if (v.items[0]->text != "torch.Size" || v.items[1]->items.size() != 1) fail(v.offset, what + ": expected torch.Size");
      seq = v.items[1]->items[0].get();
    }
    if (seq->kind != PickleKind::Tuple && seq->kind != PickleKind::List) fail(v.offset, what + ": expected a tuple of ints");
    std::vector<uint64_t> out;
    for (const auto& x : seq->items) out.push_back(integer(x.get(), v.offset, what));
    return out;
  }

  // TensorProperties: its state is (dtype, layout, requires_grad, memory_format, pin_memory) or a dict
  // with `dtype`; the dtype is a global torch.DTYPE.
  const TorchElementType* element_type(const PickleValue* props, uint64_t at, const std::string& name) const {
    if (!props) fail(at, "entry '" + name + "' has no properties");
    const PickleValue& call = unwrap(*props);
    if (call.kind != PickleKind::Reduce || class_of(*call.items[0]) != "TensorProperties")
      fail(props->offset, "entry '" + name + "': expected TensorProperties");
    const PickleValue* dtype = nullptr;
    if (props->kind == PickleKind::Build) {
      const PickleValue& state = *props->items[1];
      if (state.kind == PickleKind::Tuple && !state.items.empty()) dtype = state.items[0].get();
      else if (state.kind == PickleKind::Dict) dtype = field(state, "dtype");
    }
    if (!dtype || dtype->kind != PickleKind::Global) fail(props->offset, "entry '" + name + "': TensorProperties without a dtype");
    const TorchElementType* t = torch_element_type_of_dtype(dtype->text);
    if (!t) fail(dtype->offset, "entry '" + name + "': " + dtype->text + " is not a dtype");
    return t;
  }
};

}  // namespace

const std::vector<std::string>& dcp_allowed_globals() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = {"torch.Size", "torch.serialization._get_layout", "builtins.getattr", "collections.OrderedDict"};
    for (const char* m : kMetadataModules)
      for (const char* c : {"Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata", "MetadataIndex",
                            "TensorProperties", "MEM_FORMAT_ENCODING"})
        v.push_back(std::string(m) + "." + c);
    for (const char* m : kPropertiesModules)
      for (const char* c : {"TensorProperties", "MEM_FORMAT_ENCODING"}) v.push_back(std::string(m) + "." + c);
    for (const char* m : kFilesystemModules) v.push_back(std::string(m) + "._StorageInfo");
    for (const auto& t : torch_element_types()) v.push_back(std::string("torch.") + t.dtype);
    return v;
  }();
  return names;
}

DcpMetadata parse_dcp_metadata(const uint8_t* bytes, uint64_t size, const std::string& path) {
  PickleOptions options;
  for (const auto& g : dcp_allowed_globals()) options.allowed_globals.insert(g);
  options.allowed_what = "the DCP metadata classes, torch.Size, torch dtypes (docs/formats.md)";
  options.allow_newobj = true;
  const PickleRef root = read_pickle(bytes, size, path, options);
  return DcpReader(path).read(*root);
}

}  // namespace tmorph
