#include "formats/torch_save.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "core/utf8.h"
#include "formats/pickle_reader.h"
#include "formats/zip_archive.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

// Entry names and storage keys come from the file and may not be UTF-8.
[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::BadInput, escape_invalid_utf8(path + ": " + what));
}

// Every element type torch writes for a dense tensor: its storage class (torch.NAME, in torch.save
// files) and its dtype object (torch.DTYPE, in DCP metadata). Complex ones are recognised (sizes
// checked) but have no kernel; the float8 types exist from torch 2.1 on.
const TorchElementType kElementTypes[] = {
    {"DoubleStorage", "float64", "F64", 8, DType::F64},        {"FloatStorage", "float32", "F32", 4, DType::F32},
    {"HalfStorage", "float16", "F16", 2, DType::F16},          {"BFloat16Storage", "bfloat16", "BF16", 2, DType::BF16},
    {"LongStorage", "int64", "I64", 8, DType::I64},            {"IntStorage", "int32", "I32", 4, DType::I32},
    {"ShortStorage", "int16", "I16", 2, DType::I16},           {"CharStorage", "int8", "I8", 1, DType::I8},
    {"ByteStorage", "uint8", "U8", 1, DType::U8},              {"BoolStorage", "bool", "BOOL", 1, DType::BOOL},
    {"Float8_e4m3fnStorage", "float8_e4m3fn", "F8_E4M3", 1, DType::F8_E4M3FN},
    {"Float8_e5m2Storage", "float8_e5m2", "F8_E5M2", 1, DType::F8_E5M2},
    {"ComplexFloatStorage", "complex64", "C64", 8, std::nullopt}, {"ComplexDoubleStorage", "complex128", "C128", 16, std::nullopt},
};
using StorageType = TorchElementType;

const char kRebuildTensor[] = "torch._utils._rebuild_tensor_v2";
const char kRebuildFromType[] = "torch._tensor._rebuild_from_type_v2";
const char kOrderedDict[] = "collections.OrderedDict";

const StorageType* storage_type(const std::string& global) {
  for (const auto& t : kElementTypes)
    if (global == std::string("torch.") + t.storage) return &t;
  return nullptr;
}

std::string scalar_text(const PickleValue& v) {
  switch (v.kind) {
    case PickleKind::None: return "None";
    case PickleKind::Bool: return v.boolean ? "True" : "False";
    case PickleKind::Int: return std::to_string(v.integer);
    case PickleKind::Float: {  // the shortest text that reads back as the same double, as Python prints it
      char s[32];
      for (int digits = 15; digits <= 17; ++digits) {
        std::snprintf(s, sizeof s, "%.*g", digits, v.real);
        if (std::strtod(s, nullptr) == v.real || v.real != v.real) break;
      }
      return s;
    }
    case PickleKind::Str: return escape_invalid_utf8(v.text);
    default: return "";
  }
}

bool is_scalar(const PickleValue& v) {
  return v.kind == PickleKind::None || v.kind == PickleKind::Bool || v.kind == PickleKind::Int ||
         v.kind == PickleKind::Float || v.kind == PickleKind::Str;
}

class Walker {
 public:
  Walker(const ZipDirectory& zip, const std::string& archive, const std::string& path, TorchSaveFile& out)
      : archive_(archive), path_(path), out_(out) {
    for (const auto& e : zip.entries) entries_.emplace(e.name, &e);
  }

  // Adds the tensors under v, named from `name`; scalars directly under a dict become metadata (those
  // in lists and tuples, such as an optimizer's parameter ids, are skipped).
  void walk(const PickleRef& v, const std::string& name, bool in_dict = true) {
    // The memo lets one value be referenced many times, and a few bytes can nest such references into
    // an exponential number of paths: every visit counts.
    if (++visits_ > kMaxVisits)
      fail_at(v->offset, "the object expands to more than " + std::to_string(kMaxVisits) + " values through shared references (limit)");
    // Deeply nested shared references also make long names: their total length is bounded too.
    if ((name_bytes_ += name.size()) > kMaxNameBytes)
      fail_at(v->offset, "the object's names add up to more than " + std::to_string(kMaxNameBytes >> 20) +
                             " MiB through shared references (limit)");
    switch (v->kind) {
      case PickleKind::Dict: return walk_entries(*v, name);
      case PickleKind::List:
      case PickleKind::Tuple:
        for (size_t i = 0; i < v->items.size(); ++i) walk(v->items[i], join(name, std::to_string(i)), false);
        return;
      case PickleKind::Build: {  // an object and its state
        const PickleValue& object = *v->items[0];
        walk(v->items[0], name, in_dict);
        // An allowed object's attributes (a loss scaler's scale, argparse.Namespace's arguments): the
        // entries of its state dict, unless the object is a tensor or a dict itself.
        const bool plain_object = object.kind == PickleKind::Reduce && object.items[0]->text != kOrderedDict && !tensor_args(object);
        if (plain_object && v->items[1]->kind == PickleKind::Dict) walk_entries(*v->items[1], name);
        return;
      }
      case PickleKind::Reduce: {
        const std::string& callable = v->items[0]->text;
        if (callable == kOrderedDict) return walk_entries(*v, name);
        if (const PickleValue* args = tensor_args(*v)) return add_tensor(*args, name, v->offset);
        return;  // an allowed call that makes no tensor (e.g. an empty OrderedDict of hooks)
      }
      default:
        if (in_dict && is_scalar(*v) && !name.empty()) out_.metadata[name] = scalar_text(*v);
        return;
    }
  }

 private:
  const std::string& archive_;
  const std::string& path_;
  TorchSaveFile& out_;
  std::unordered_map<std::string, const ZipEntry*> entries_;
  std::unordered_map<std::string, size_t> storage_index_;
  uint64_t visits_ = 0;
  uint64_t name_bytes_ = 0;
  // A state dict with its optimizer's state is far below both (tens of thousands of values, short names).
  static constexpr uint64_t kMaxVisits = 1'000'000;
  static constexpr uint64_t kMaxNameBytes = uint64_t{64} << 20;

  static std::string join(const std::string& prefix, const std::string& key) { return prefix.empty() ? key : prefix + "." + key; }

  [[noreturn]] void fail_at(uint64_t offset, const std::string& what) const {
    bad(path_, archive_ + "/data.pkl byte " + std::to_string(offset) + ": " + what);
  }

  void walk_entries(const PickleValue& d, const std::string& name) {
    for (const auto& [k, value] : d.entries) {
      if (!is_scalar(*k)) fail_at(k->offset, std::string("a dict key is a ") + pickle_kind_name(k->kind) + " (expected a string or number)");
      walk(value, join(name, scalar_text(*k)));
    }
  }

  // The _rebuild_tensor_v2 arguments that make the tensor v, or null when v makes no tensor.
  const PickleValue* tensor_args(const PickleValue& v) const {
    const std::string& callable = v.items[0]->text;
    const PickleValue& args = *v.items[1];
    if (callable == kRebuildTensor) return &args;
    if (callable == "torch._utils._rebuild_parameter" || callable == "torch._utils._rebuild_parameter_with_state") {
      if (args.items.empty() || args.items[0]->kind != PickleKind::Reduce) fail_at(args.offset, callable + " expects a tensor first");
      const PickleValue* inner = tensor_args(*args.items[0]);
      if (!inner) fail_at(args.offset, callable + " expects a tensor first");
      return inner;
    }
    if (callable == kRebuildFromType) {  // (func, type, args, state): func(*args) is the tensor
      if (args.items.size() < 3 || args.items[0]->kind != PickleKind::Global || args.items[0]->text != kRebuildTensor ||
          args.items[2]->kind != PickleKind::Tuple)
        fail_at(args.offset, std::string(kRebuildFromType) + " expects (" + kRebuildTensor + ", type, arguments, state)");
      return args.items[2].get();
    }
    return nullptr;
  }

  uint64_t non_negative(const PickleValue& v, const std::string& what) const {
    if (v.kind != PickleKind::Int || v.integer < 0) fail_at(v.offset, what + ": expected a non-negative int, found a " + pickle_kind_name(v.kind));
    return static_cast<uint64_t>(v.integer);
  }

  std::vector<uint64_t> int_tuple(const PickleValue& v, const std::string& what) const {
    if (v.kind != PickleKind::Tuple) fail_at(v.offset, what + ": expected a tuple of ints, found a " + pickle_kind_name(v.kind));
    std::vector<uint64_t> out;
    for (const auto& x : v.items) out.push_back(non_negative(*x, what));
    return out;
  }

  // The storage a persistent id ('storage', torch.TYPEStorage, key, location, elements) names.
  size_t storage(const PickleValue& pid_node, const std::string& tensor) {
    const std::string where = "tensor '" + tensor + "'";
    if (pid_node.kind != PickleKind::PersistentId) fail_at(pid_node.offset, where + ": expected a storage (persistent id), found a " + pickle_kind_name(pid_node.kind));
    const PickleValue& pid = *pid_node.items[0];
    if (pid.kind != PickleKind::Tuple || pid.items.size() != 5 || pid.items[0]->kind != PickleKind::Str || pid.items[0]->text != "storage" ||
        pid.items[1]->kind != PickleKind::Global || pid.items[2]->kind != PickleKind::Str)
      fail_at(pid.offset, where + ": expected a persistent id ('storage', storage type, key, location, size)");
    const StorageType* type = storage_type(pid.items[1]->text);
    if (!type) fail_at(pid.items[1]->offset, where + ": " + pid.items[1]->text + " is not a storage type");
    const std::string& key = pid.items[2]->text;
    if (key.size() > 256) fail_at(pid.items[2]->offset, where + ": a storage key of " + std::to_string(key.size()) + " bytes (at most 256)");
    const uint64_t elements = non_negative(*pid.items[4], where + " storage size");
    if (auto it = storage_index_.find(key); it != storage_index_.end()) {
      const TorchStorage& s = out_.storages[it->second];
      if (s.type != type->storage || s.elements != elements)
        fail_at(pid.offset, where + ": storage " + key + " is " + s.type + " of " + std::to_string(s.elements) + " elements elsewhere, " +
                                type->storage + " of " + std::to_string(elements) + " here");
      return it->second;
    }
    const std::string entry_name = archive_ + "/data/" + key;
    auto e = entries_.find(entry_name);
    if (e == entries_.end()) fail_at(pid.offset, where + ": its storage " + entry_name + " is not in the archive");
    const ZipEntry& z = *e->second;
    if (z.method != 0) bad(path_, "storage " + entry_name + " is compressed (method " + std::to_string(z.method) + "); torch.save stores storages uncompressed");
    if (elements > UINT64_MAX / type->bytes || elements * type->bytes != z.size)
      bad(path_, "storage " + entry_name + " holds " + std::to_string(z.size) + " bytes; data.pkl says " + std::to_string(elements) + " elements of " +
                     type->storage + " (" + std::to_string(type->bytes) + " bytes each)");
    TorchStorage s;
    s.key = key;
    s.type = type->storage;
    s.stored_type = type->stored_type;
    s.dtype = type->kernel_dtype;
    s.element_bytes = type->bytes;
    s.elements = elements;
    s.file_offset = z.data_offset;
    storage_index_.emplace(key, out_.storages.size());
    out_.storages.push_back(std::move(s));
    return out_.storages.size() - 1;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]).
  void add_tensor(const PickleValue& args, const std::string& name, uint64_t offset) {
    const std::string where = "tensor '" + name + "'";
    if (args.kind != PickleKind::Tuple || args.items.size() < 4)
      fail_at(offset, where + ": expected (storage, storage offset, size, stride, ...) for " + kRebuildTensor);
    TorchTensorView t;
    t.name = name;
    t.storage = storage(*args.items[0], name);
    t.storage_offset = non_negative(*args.items[1], where + " storage offset");
    t.shape = int_tuple(*args.items[2], where + " size");
    t.strides = int_tuple(*args.items[3], where + " stride");
    if (t.shape.size() != t.strides.size())
      fail_at(args.items[3]->offset, where + ": " + std::to_string(t.shape.size()) + " sizes but " + std::to_string(t.strides.size()) + " strides");
    const TorchStorage& s = out_.storages[t.storage];
    // Element count, the last element's position in the storage and contiguity, all overflow-checked.
    t.elements = 1;
    uint64_t last = t.storage_offset, dense = 1;
    t.contiguous = true;
    for (size_t i = t.shape.size(); i-- > 0;) {
      const uint64_t n = t.shape[i], st = t.strides[i];
      if (n != 0 && t.elements > UINT64_MAX / n) fail_at(offset, where + ": element count overflows 64 bits");
      t.elements *= n;
      if (n > 1 && st != dense) t.contiguous = false;
      if (n != 0 && st != 0 && (n - 1 > (UINT64_MAX - last) / st)) fail_at(offset, where + ": its extent overflows 64 bits");
      if (n != 0) last += (n - 1) * st;
      if (n != 0 && dense > UINT64_MAX / n) dense = UINT64_MAX;  // only compared with strides that fit
      else dense *= n;
    }
    if (t.elements == 0) t.contiguous = true;
    else if (last >= s.elements)
      bad(path_, where + " reaches element " + std::to_string(last) + " of storage " + archive_ + "/data/" + s.key + ", which holds " +
                     std::to_string(s.elements) + " elements (a storage shorter than its tensor)");
    if (t.elements > UINT64_MAX / s.element_bytes) fail_at(offset, where + ": byte size overflows 64 bits");
    out_.tensors.push_back(std::move(t));
  }
};

// The archive's top folder: the one whose data.pkl there is. Refuses archives with none or several.
std::string archive_folder(const ZipDirectory& zip, const std::string& path) {
  std::string found;
  for (const auto& e : zip.entries) {
    const size_t slash = e.name.find('/');
    if (slash == std::string::npos) continue;
    const std::string rest = e.name.substr(slash + 1), top = e.name.substr(0, slash);
    if (rest == "constants.pkl" || rest.rfind("code/", 0) == 0)
      bad(path, "a TorchScript archive (torch.jit.save, entry " + e.name + "): not supported; only torch.save files are");
    if (rest != "data.pkl") continue;
    if (!found.empty() && found != top) bad(path, "zip holds two data.pkl entries (" + found + "/ and " + top + "/)");
    found = top;
  }
  if (found.empty()) bad(path, "a zip without an ARCHIVE/data.pkl entry: not a torch.save file");
  return found;
}

}  // namespace

const std::vector<std::string>& torch_allowed_globals() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v = {kRebuildTensor, "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state",
                                  kRebuildFromType, "torch.Tensor", "torch.nn.parameter.Parameter", kOrderedDict};
    for (const auto& t : kElementTypes) v.push_back(std::string("torch.") + t.storage);
    return v;
  }();
  return names;
}

const TorchElementType* torch_element_type_of_dtype(const std::string& global) {
  for (const auto& t : kElementTypes)
    if (global == std::string("torch.") + t.dtype) return &t;
  return nullptr;
}

const std::vector<TorchElementType>& torch_element_types() {
  static const std::vector<TorchElementType> all(std::begin(kElementTypes), std::end(kElementTypes));
  return all;
}

bool looks_like_torch_zip(const uint8_t* bytes, uint64_t size) { return looks_like_zip(bytes, size); }

bool looks_like_legacy_torch(const uint8_t* bytes, uint64_t size) {
  // PROTO 2, LONG1 of 10 bytes: the magic number 0x1950a86a20f9469cfc6c, little-endian.
  static const uint8_t kMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  return size >= sizeof kMagic && std::memcmp(bytes, kMagic, sizeof kMagic) == 0;
}

TorchSaveFile parse_torch_save(const uint8_t* bytes, uint64_t size, const std::string& path, const TorchSaveOptions& extra) {
  if (looks_like_legacy_torch(bytes, size))
    bad(path, "the legacy torch.save format (before torch 1.6, not a zip): not supported; re-save it with a newer torch");
  const ZipDirectory zip = read_zip_directory(bytes, size, path);
  TorchSaveFile out;
  out.archive = archive_folder(zip, path);
  if (const ZipEntry* order = zip.find(out.archive + "/byteorder")) {
    const std::string text = order->method == 0 ? std::string(reinterpret_cast<const char*>(bytes + order->data_offset), order->size) : "";
    if (text != "little") bad(path, out.archive + "/byteorder says '" + escape_invalid_utf8(text.substr(0, 16)) + "'; only little-endian files are read");
  }
  const ZipEntry& pkl = *zip.find(out.archive + "/data.pkl");
  if (pkl.method != 0) bad(path, out.archive + "/data.pkl is compressed (method " + std::to_string(pkl.method) + "); torch.save stores it");
  out.header_bytes = pkl.data_offset + pkl.size;

  PickleOptions options;
  for (const auto& g : torch_allowed_globals()) options.allowed_globals.insert(g);
  options.allowed_what = "torch's tensor rebuild functions, torch.*Storage types, collections.OrderedDict" +
                         (extra.extra_what.empty() ? "" : ", " + extra.extra_what) + " (docs/formats.md)";
  for (const auto& g : extra.extra_globals) options.allowed_globals.insert(g);
  options.allow_newobj = extra.allow_newobj;
  options.file_offset = pkl.data_offset;
  const PickleRef root = read_pickle(bytes + pkl.data_offset, pkl.size, path + ": " + out.archive + "/data.pkl", options);
  Walker(zip, out.archive, path, out).walk(root, "");
  if (is_scalar(*root)) out.scalar = scalar_text(*root);
  out.root = root;
  for (auto& t : out.tensors)
    if (t.name.empty()) t.name = "tensor";  // torch.save of one bare tensor
  return out;
}

}  // namespace tmorph
