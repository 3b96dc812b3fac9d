#include "formats/torch_save.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <unordered_map>

#include "core/utf8.h"
#include "formats/pickle_reader.h"
#include "formats/zip_archive.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

// Entry names and storage keys come from the file and may not be UTF-8.
[[noreturn]] void torch_bad(const std::string& path, const std::string& what) {
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

// Where a storage's bytes lie: given its key, element type and element count (as its persistent id
// says; `at` is the id's offset in the pickle, `where` names the tensor that uses it), the file offset
// of its first byte, after checking that
// the file holds it there. The legacy format learns the offsets only after the object pickle (the
// storages follow it): its Locate returns 0 and the offsets are filled in afterwards.
using Locate = std::function<uint64_t(const std::string& key, const StorageType& type, uint64_t elements, uint64_t at, const std::string& where)>;

// Walks a torch.save object tree (the zip format's data.pkl, the legacy format's object pickle: the
// same tree) and lists its tensors, storages and scalar metadata in a TorchSaveFile.
class Walker {
 public:
  // `pickle` names the pickle in errors ("archive/data.pkl"); `storage_prefix` is put before a storage's
  // key to name it ("archive/data/"); `pid_items` is the persistent id's length (5 in the zip format,
  // 6 in the legacy one, whose last item is a storage view's metadata).
  Walker(std::string pickle, std::string storage_prefix, size_t pid_items, const std::string& path, TorchSaveFile& out, Locate locate)
      : pickle_(std::move(pickle)), storage_prefix_(std::move(storage_prefix)), pid_items_(pid_items), path_(path), out_(out),
        locate_(std::move(locate)) {}

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

  // The position in TorchSaveFile::storages of the storage called key, or none.
  std::optional<size_t> storage_of(const std::string& key) const {
    auto it = storage_index_.find(key);
    return it == storage_index_.end() ? std::nullopt : std::optional<size_t>(it->second);
  }

 private:
  const std::string pickle_;
  const std::string storage_prefix_;
  const size_t pid_items_;
  const std::string& path_;
  TorchSaveFile& out_;
  const Locate locate_;
  std::unordered_map<std::string, size_t> storage_index_;
  std::unordered_map<std::string, uint64_t> tensor_names_;  // name -> the offset of the call that made it
  std::optional<uint64_t> empty_key_at_;  // set while walking under a dict key that is the empty string
  uint64_t visits_ = 0;
  uint64_t name_bytes_ = 0;
  // A state dict with its optimizer's state is far below both (tens of thousands of values, short names).
  static constexpr uint64_t kMaxVisits = 1'000'000;
  static constexpr uint64_t kMaxNameBytes = uint64_t{64} << 20;

  static std::string join(const std::string& prefix, const std::string& key) { return prefix.empty() ? key : prefix + "." + key; }

  [[noreturn]] void fail_at(uint64_t offset, const std::string& what) const {
    torch_bad(path_, pickle_ + " byte " + std::to_string(offset) + ": " + what);
  }

  void walk_entries(const PickleValue& d, const std::string& name) {
    for (const auto& [k, value] : d.entries) {
      if (!is_scalar(*k)) fail_at(k->offset, std::string("a dict key is a ") + pickle_kind_name(k->kind) + " (expected a string or number)");
      const std::optional<uint64_t> outer = empty_key_at_;
      if (k->kind == PickleKind::Str && k->text.empty() && !empty_key_at_) empty_key_at_ = k->offset;
      walk(value, join(name, scalar_text(*k)));
      empty_key_at_ = outer;
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
    if (pid.kind != PickleKind::Tuple || pid.items.size() != pid_items_ || pid.items[0]->kind != PickleKind::Str ||
        pid.items[0]->text != "storage" || pid.items[1]->kind != PickleKind::Global || pid.items[2]->kind != PickleKind::Str)
      fail_at(pid.offset, where + (pid_items_ == 5 ? ": expected a persistent id ('storage', storage type, key, location, size)"
                                                   : ": expected a persistent id ('storage', storage type, key, location, size, view)"));
    // The legacy format's last item describes a view on another storage; torch 1.x always writes None
    // (only torch 0.x could save a storage view).
    if (pid_items_ == 6 && pid.items[5]->kind != PickleKind::None)
      fail_at(pid.items[5]->offset, where + ": its storage is a view on another storage (a " + pickle_kind_name(pid.items[5]->kind) +
                                        " of view metadata, written by torch before 1.0): not supported");
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
    const uint64_t file_offset = locate_(key, *type, elements, pid.offset, where);
    TorchStorage s;
    s.key = key;
    s.type = type->storage;
    s.stored_type = type->stored_type;
    s.dtype = type->kernel_dtype;
    s.element_bytes = type->bytes;
    s.elements = elements;
    s.file_offset = file_offset;
    storage_index_.emplace(key, out_.storages.size());
    out_.storages.push_back(std::move(s));
    return out_.storages.size() - 1;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]).
  void add_tensor(const PickleValue& args, const std::string& name, uint64_t offset) {
    const std::string where = "tensor '" + name + "'";
    if (args.kind != PickleKind::Tuple || args.items.size() < 4)
      fail_at(offset, where + ": expected (storage, storage offset, size, stride, ...) for " + kRebuildTensor);
    // Names are what a user selects tensors by: none may be empty or made twice (dict keys 1 and '1',
    // or 'a.b' beside 'a' holding 'b'). The saved object itself being a tensor is the one unnamed case
    // (named "tensor" by parse_torch_save).
    if (empty_key_at_)
      fail_at(*empty_key_at_, "a dict key is the empty string, which tensor '" + name + "' is named under (tensor names and their parts must not be empty)");
    if (auto [it, fresh] = tensor_names_.emplace(name, offset); !fresh)
      fail_at(offset, "a second tensor is named '" + name + "' (the first is made at byte " + std::to_string(it->second) +
                          "; tensor names must be unique)");
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
      torch_bad(path_, where + " reaches element " + std::to_string(last) + " of storage " + storage_prefix_ + s.key + ", which holds " +
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
      torch_bad(path, "a TorchScript archive (torch.jit.save, entry " + e.name + "): not supported; only torch.save files are");
    if (rest != "data.pkl") continue;
    if (!found.empty() && found != top) torch_bad(path, "zip holds two data.pkl entries (" + found + "/ and " + top + "/)");
    found = top;
  }
  if (found.empty()) torch_bad(path, "a zip without an ARCHIVE/data.pkl entry: not a torch.save file");
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

namespace {

// The pickle options of a torch.save object tree: torch's globals and the caller's extra ones.
PickleOptions object_pickle_options(const TorchSaveOptions& extra, uint64_t file_offset) {
  PickleOptions options;
  for (const auto& g : torch_allowed_globals()) options.allowed_globals.insert(g);
  options.allowed_what = "torch's tensor rebuild functions, torch.*Storage types, collections.OrderedDict" +
                         (extra.extra_what.empty() ? "" : ", " + extra.extra_what) + " (docs/formats.md)";
  for (const auto& g : extra.extra_globals) options.allowed_globals.insert(g);
  options.allow_newobj = extra.allow_newobj;
  options.file_offset = file_offset;
  return options;
}

void finish(TorchSaveFile& out, const PickleRef& root) {
  if (is_scalar(*root)) out.scalar = scalar_text(*root);
  out.root = root;
  for (auto& t : out.tensors)
    if (t.name.empty()) t.name = "tensor";  // torch.save of one bare tensor (empty dict keys are refused)
}

// CRC-32 checks when the file is opened: data.pkl always; then, in directory order, stored entries of
// at most kCrcAtOpenBytes each while their total stays within kCrcAtOpenTotal (a checkpoint's small
// storages: biases, norms, counters, and the version and byteorder records), so opening costs at most
// data.pkl + 16 MiB of hashing (about 3 ms at zlib's 5 GB/s). Every other storage is checked where a
// full pass reads its bytes (stats, index: docs/formats.md).
constexpr uint64_t kCrcAtOpenBytes = uint64_t{1} << 20;
constexpr uint64_t kCrcAtOpenTotal = uint64_t{16} << 20;

TorchSaveFile parse_zip(const uint8_t* bytes, uint64_t size, const std::string& path, const TorchSaveOptions& extra) {
  const ZipDirectory zip = read_zip_directory(bytes, size, path);
  TorchSaveFile out;
  out.archive = archive_folder(zip, path);
  const ZipEntry& pkl = *zip.find(out.archive + "/data.pkl");
  if (pkl.method != 0) torch_bad(path, out.archive + "/data.pkl is compressed (method " + std::to_string(pkl.method) + "); torch.save stores it");
  // Damage is named as such before anything reads the bytes it changed.
  std::unordered_map<const ZipEntry*, bool> checked;
  uint64_t budget = kCrcAtOpenTotal;
  for (const auto& e : zip.entries) {
    const bool small = e.size <= kCrcAtOpenBytes && e.size <= budget;
    if (e.method != 0 || (&e != &pkl && !small)) continue;
    check_zip_crc(bytes, e, path);
    if (&e != &pkl) budget -= e.size;
    checked[&e] = true;
  }
  if (const ZipEntry* order = zip.find(out.archive + "/byteorder")) {
    const std::string text = order->method == 0 ? std::string(reinterpret_cast<const char*>(bytes + order->data_offset), order->size) : "";
    if (text != "little") torch_bad(path, out.archive + "/byteorder says '" + escape_invalid_utf8(text.substr(0, 16)) + "'; only little-endian files are read");
  }
  out.header_bytes = pkl.data_offset + pkl.size;

  const PickleRef root = read_pickle(bytes + pkl.data_offset, pkl.size, path + ": " + out.archive + "/data.pkl", object_pickle_options(extra, pkl.data_offset));
  std::unordered_map<std::string, const ZipEntry*> entries;
  for (const auto& e : zip.entries) entries.emplace(e.name, &e);
  const std::string prefix = out.archive + "/data/";
  auto locate = [&](const std::string& key, const StorageType& type, uint64_t elements, uint64_t at, const std::string& where) -> uint64_t {
    const std::string entry_name = prefix + key;
    auto e = entries.find(entry_name);
    if (e == entries.end())
      torch_bad(path, out.archive + "/data.pkl byte " + std::to_string(at) + ": " + where + ": its storage " + entry_name + " is not in the archive");
    const ZipEntry& z = *e->second;
    if (z.method != 0) torch_bad(path, "storage " + entry_name + " is compressed (method " + std::to_string(z.method) + "); torch.save stores storages uncompressed");
    if (elements > UINT64_MAX / type.bytes || elements * type.bytes != z.size)
      torch_bad(path, "storage " + entry_name + " holds " + std::to_string(z.size) + " bytes; data.pkl says " + std::to_string(elements) + " elements of " +
                    type.storage + " (" + std::to_string(type.bytes) + " bytes each)");
    return z.data_offset;
  };
  Walker(out.archive + "/data.pkl", prefix, 5, path, out, locate).walk(root, "");
  for (auto& s : out.storages) {
    const ZipEntry& z = *entries.at(prefix + s.key);
    s.crc32 = z.crc32;
    s.crc_checked = checked.count(&z) > 0;
  }
  finish(out, root);
  return out;
}

// The legacy format (torch.save before 1.6, and with _use_new_zipfile_serialization=False since): five
// pickles one after another, then the storages' bytes.
//   1. the magic number 0x1950a86a20f9469cfc6c (a LONG1 of 10 bytes, compared as bytes)
//   2. the protocol version, 1001
//   3. sys_info: {'protocol_version': 1001, 'little_endian': bool, 'type_sizes': {'short', 'int', 'long'}}
//   4. the saved object, whose tensors name storages by persistent ids ('storage', torch.TYPEStorage,
//      key, location, elements, view metadata)
//   5. the list of storage keys, in the order their bytes follow
// then, for each key of that list, the storage's element count (8 bytes, little-endian: torch writes an
// int64 whatever sys_info says of `long`, which is 4 bytes in files written on Windows) and its elements.
constexpr uint64_t kLegacyMagicBytes = 15;  // PROTO 2, LONG1 10 bytes, STOP
constexpr int64_t kLegacyProtocol = 1001;

const PickleValue* dict_item(const PickleValue& d, const char* key) {
  for (const auto& [k, v] : d.entries)
    if (k->kind == PickleKind::Str && k->text == key) return v.get();
  return nullptr;
}

void check_sys_info(const PickleValue& info, uint64_t at, const std::string& path) {
  const std::string where = "sys_info (the pickle at file offset " + std::to_string(at) + ")";
  if (info.kind != PickleKind::Dict) torch_bad(path, where + " is a " + pickle_kind_name(info.kind) + ", expected a dict");
  const PickleValue* version = dict_item(info, "protocol_version");
  if (!version || version->kind != PickleKind::Int || version->integer != kLegacyProtocol)
    torch_bad(path, where + ": expected 'protocol_version': 1001");
  const PickleValue* little = dict_item(info, "little_endian");
  if (!little || little->kind != PickleKind::Bool) torch_bad(path, where + ": expected 'little_endian': True or False");
  if (!little->boolean) torch_bad(path, where + " says the file was written big-endian; only little-endian files are read");
  const PickleValue* sizes = dict_item(info, "type_sizes");
  if (!sizes || sizes->kind != PickleKind::Dict) torch_bad(path, where + ": expected 'type_sizes': a dict of the sizes of short, int and long");
  // What C's types measured where the file was written. Storages do not depend on them (element
  // sizes are the storage types', counts are int64), but other sizes mean a platform torch never ran on.
  const struct { const char* name; int64_t a, b; } expected_sizes[] = {{"short", 2, 2}, {"int", 4, 4}, {"long", 4, 8}};
  for (const auto& e : expected_sizes) {
    const PickleValue* v = dict_item(*sizes, e.name);
    if (!v || v->kind != PickleKind::Int || (v->integer != e.a && v->integer != e.b))
      torch_bad(path, where + ": type_sizes['" + e.name + "'] " + (v && v->kind == PickleKind::Int ? "is " + std::to_string(v->integer) : std::string("is missing")) +
                    ", expected " + std::to_string(e.a) + (e.a != e.b ? " or " + std::to_string(e.b) : ""));
  }
}

TorchSaveFile parse_legacy(const uint8_t* bytes, uint64_t size, const std::string& path, const TorchSaveOptions& extra) {
  if (size < kLegacyMagicBytes || bytes[kLegacyMagicBytes - 1] != '.')
    torch_bad(path, "byte 14: the legacy torch.save magic number's pickle does not end with STOP (truncated or damaged)");
  uint64_t at = kLegacyMagicBytes, used = 0;
  PickleOptions plain;  // the records name no globals
  plain.file_offset = at;
  const PickleRef version = read_pickle(bytes + at, size - at, path + ": the protocol version record", plain, &used);
  if (version->kind != PickleKind::Int || version->integer != kLegacyProtocol)
    torch_bad(path, "file offset " + std::to_string(at) + ": legacy torch.save protocol version " +
                  (version->kind == PickleKind::Int ? std::to_string(version->integer) : std::string("(a ") + pickle_kind_name(version->kind) + ")") +
                  ", expected 1001");
  at += used;
  plain.file_offset = at;
  check_sys_info(*read_pickle(bytes + at, size - at, path + ": sys_info", plain, &used), at, path);
  at += used;
  const uint64_t object_at = at;
  const std::string object_name = "the object pickle (file offset " + std::to_string(object_at) + ")";
  const PickleRef root = read_pickle(bytes + at, size - at, path + ": " + object_name, object_pickle_options(extra, at), &used);
  at += used;
  const uint64_t keys_at = at;
  plain.file_offset = at;
  const PickleRef keys = read_pickle(bytes + at, size - at, path + ": the storage key list", plain, &used);
  at += used;
  if (keys->kind != PickleKind::List)
    torch_bad(path, "file offset " + std::to_string(keys_at) + ": the storage key list is a " + pickle_kind_name(keys->kind) + ", expected a list");

  TorchSaveFile out;
  out.header_bytes = at;
  auto locate = [](const std::string&, const StorageType&, uint64_t, uint64_t, const std::string&) -> uint64_t { return 0; };  // filled in below
  Walker walker(object_name, "", 6, path, out, locate);
  walker.walk(root, "");

  // The key list names every storage the object uses, once each, and nothing else.
  std::vector<bool> listed(out.storages.size(), false);
  for (const auto& k : keys->items) {
    if (k->kind != PickleKind::Str)
      torch_bad(path, "file offset " + std::to_string(keys_at) + ": the storage key list holds a " + pickle_kind_name(k->kind) + ", expected strings");
    const std::optional<size_t> s = walker.storage_of(k->text);
    if (!s) torch_bad(path, "the storage key list names storage '" + k->text + "', which no tensor of the object uses");
    if (listed[*s]) torch_bad(path, "the storage key list names storage '" + k->text + "' twice");
    listed[*s] = true;
  }
  for (size_t i = 0; i < listed.size(); ++i)
    if (!listed[i]) torch_bad(path, "storage '" + out.storages[i].key + "' (used by the object) is not in the storage key list: its bytes are not in the file");

  // The storages, in the list's order: an 8-byte element count, then the elements.
  for (const auto& k : keys->items) {
    TorchStorage& s = out.storages[*walker.storage_of(k->text)];
    const std::string where = "storage '" + s.key + "' at file offset " + std::to_string(at);
    if (size - at < 8) torch_bad(path, where + ": the file ends before its 8-byte element count (truncated)");
    uint64_t count = 0;
    for (int i = 0; i < 8; ++i) count |= static_cast<uint64_t>(bytes[at + i]) << (8 * i);
    if (count != s.elements)
      torch_bad(path, where + ": its element count says " + std::to_string(count) + ", the object pickle says " + std::to_string(s.elements));
    at += 8;
    if (s.elements > (size - at) / s.element_bytes)
      torch_bad(path, where + ": " + std::to_string(s.elements) + " elements of " + std::to_string(s.element_bytes) + " bytes run past the end of the file (" +
                    std::to_string(size - at) + " bytes remain; truncated)");
    s.file_offset = at;
    at += s.elements * s.element_bytes;
  }
  if (at != size) torch_bad(path, "file offset " + std::to_string(at) + ": " + std::to_string(size - at) + " bytes follow the last storage");
  finish(out, root);
  return out;
}

}  // namespace

bool looks_like_torch_tar(const uint8_t* bytes, uint64_t size) {
  // A POSIX tar header ("ustar" at byte 257) whose first member is one torch <= 0.3 wrote.
  if (size < 512 || std::memcmp(bytes + 257, "ustar", 5) != 0) return false;
  const std::string first(reinterpret_cast<const char*>(bytes), strnlen(reinterpret_cast<const char*>(bytes), 100));
  return first == "sys_info" || first == "pickle" || first == "storages" || first == "tensors";
}

TorchSaveFile parse_torch_save(const uint8_t* bytes, uint64_t size, const std::string& path, const TorchSaveOptions& extra) {
  if (looks_like_torch_tar(bytes, size))
    torch_bad(path, "a tar archive with sys_info, pickle, storages and tensors members: torch.save's format of torch 0.3 and earlier, "
              "which is not supported; load it with torch and save it again");
  if (looks_like_legacy_torch(bytes, size)) return parse_legacy(bytes, size, path, extra);
  return parse_zip(bytes, size, path, extra);
}

void check_storage_crc(const TorchSaveFile& f, const TorchStorage& s, const uint8_t* bytes, const std::string& path) {
  if (s.crc_checked) return;
  ZipEntry e;
  e.name = f.archive + "/data/" + s.key;
  e.data_offset = s.file_offset;
  e.size = s.elements * s.element_bytes;
  e.crc32 = s.crc32;
  check_zip_crc(bytes, e, path);
}

}  // namespace tmorph
