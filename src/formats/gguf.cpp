#include "formats/gguf.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "core/utf8.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

// ggml's block layouts (ggml/src/ggml.c type_traits), by type id. Ids 4, 5 and 31-33, 36-38 are
// retired or unassigned in GGUF files and refused.
const GgmlType kGgmlTypes[] = {
    {0, "F32", 1, 4, DType::F32},        {1, "F16", 1, 2, DType::F16},
    {2, "Q4_0", 32, 18, std::nullopt},   {3, "Q4_1", 32, 20, std::nullopt},
    {6, "Q5_0", 32, 22, std::nullopt},   {7, "Q5_1", 32, 24, std::nullopt},
    {8, "Q8_0", 32, 34, std::nullopt},   {9, "Q8_1", 32, 36, std::nullopt},
    {10, "Q2_K", 256, 84, std::nullopt}, {11, "Q3_K", 256, 110, std::nullopt},
    {12, "Q4_K", 256, 144, std::nullopt}, {13, "Q5_K", 256, 176, std::nullopt},
    {14, "Q6_K", 256, 210, std::nullopt}, {15, "Q8_K", 256, 292, std::nullopt},
    {16, "IQ2_XXS", 256, 66, std::nullopt}, {17, "IQ2_XS", 256, 74, std::nullopt},
    {18, "IQ3_XXS", 256, 98, std::nullopt}, {19, "IQ1_S", 256, 50, std::nullopt},
    {20, "IQ4_NL", 32, 18, std::nullopt}, {21, "IQ3_S", 256, 110, std::nullopt},
    {22, "IQ2_S", 256, 82, std::nullopt}, {23, "IQ4_XS", 256, 136, std::nullopt},
    {24, "I8", 1, 1, DType::I8},         {25, "I16", 1, 2, DType::I16},
    {26, "I32", 1, 4, DType::I32},       {27, "I64", 1, 8, DType::I64},
    {28, "F64", 1, 8, DType::F64},       {29, "IQ1_M", 256, 56, std::nullopt},
    {30, "BF16", 1, 2, DType::BF16},     {34, "TQ1_0", 256, 54, std::nullopt},
    {35, "TQ2_0", 256, 66, std::nullopt}, {39, "MXFP4", 32, 17, std::nullopt},
};

constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 8;

// Bounded little-endian reader: every read checks the remaining bytes first. GGUF v1 stores counts and
// string lengths as UINT32 (`narrow` lengths), v2 and v3 as UINT64; length() reads whichever the file has.
class Cursor {
 public:
  Cursor(const uint8_t* p, uint64_t size, const std::string& path) : p_(p), size_(size), path_(path) {}
  void set_narrow_lengths(bool narrow) { narrow_ = narrow; }
  bool narrow_lengths() const { return narrow_; }
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  [[noreturn]] void fail(uint64_t at, const std::string& what) const {
    throw Error(ErrorKind::BadInput, path_ + ": at byte " + std::to_string(at) + ": " + what);
  }
  void need(uint64_t n, const char* what) const {
    if (n > remaining())
      fail(pos_, std::string(what) + " needs " + std::to_string(n) + " bytes, the file has " +
                     std::to_string(remaining()) + " left (size " + std::to_string(size_) + ")");
  }
  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  uint64_t length(const char* what) { return narrow_ ? read<uint32_t>(what) : read<uint64_t>(what); }
  std::string string(const char* what) {
    const uint64_t at = pos_;
    const uint64_t n = length(what);
    if (n > remaining())
      fail(at, std::string(what) + ": string length " + std::to_string(n) + " runs past the end of the file (size " +
                   std::to_string(size_) + ")");
    std::string s(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return s;
  }
  // Checks and passes over a string without copying it.
  void skip_string(const char* what) {
    const uint64_t at = pos_;
    const uint64_t n = length(what);
    if (n > remaining())
      fail(at, std::string(what) + ": string length " + std::to_string(n) + " runs past the end of the file (size " +
                   std::to_string(size_) + ")");
    pos_ += n;
  }
  void skip(uint64_t n, const char* what) {
    need(n, what);
    pos_ += n;
  }

 private:
  const uint8_t* p_;
  uint64_t size_;
  std::string path_;
  uint64_t pos_ = 0;
  bool narrow_ = false;
};

// The fewest bytes a value of type t takes (a string or array with its length field only).
uint64_t min_encoded_size(GgufType t, bool narrow_lengths) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    case GgufType::STRING: return narrow_lengths ? 4 : 8;
    case GgufType::ARRAY: return narrow_lengths ? 8 : 12;
  }
  return 1;
}

// GGUF v1 defined the types up to ARRAY; UINT64, INT64 and FLOAT64 came with v2.
bool known_type(uint32_t t, bool v1) { return t <= static_cast<uint32_t>(v1 ? GgufType::ARRAY : GgufType::F64); }

nlohmann::json read_value(Cursor& c, GgufType type, int depth, GgufKv* kv, GgufArrays arrays);

// Appended to "unknown type" refusals of a v1 file, whose type list was shorter.
std::string version_note(const Cursor& c) { return c.narrow_lengths() ? " (GGUF v1 defines types 0 to 9)" : ""; }

// Validates `count` array elements of `element` type exactly as read_value would, building nothing.
void skip_elements(Cursor& c, GgufType element, uint64_t count, int depth) {
  switch (element) {
    case GgufType::STRING:
      for (uint64_t i = 0; i < count; ++i) c.skip_string("STRING value");
      return;
    case GgufType::BOOL:
    case GgufType::ARRAY:
      for (uint64_t i = 0; i < count; ++i) read_value(c, element, depth + 1, nullptr, GgufArrays::Summary);
      return;
    default:
      c.skip(count * min_encoded_size(element, c.narrow_lengths()), "ARRAY elements");  // count was checked against the bytes left
  }
}

nlohmann::json read_value(Cursor& c, GgufType type, int depth, GgufKv* kv, GgufArrays arrays) {
  switch (type) {
    case GgufType::U8: return c.read<uint8_t>("UINT8 value");
    case GgufType::I8: return c.read<int8_t>("INT8 value");
    case GgufType::U16: return c.read<uint16_t>("UINT16 value");
    case GgufType::I16: return c.read<int16_t>("INT16 value");
    case GgufType::U32: return c.read<uint32_t>("UINT32 value");
    case GgufType::I32: return c.read<int32_t>("INT32 value");
    case GgufType::F32: return static_cast<double>(c.read<float>("FLOAT32 value"));
    case GgufType::U64: return c.read<uint64_t>("UINT64 value");
    case GgufType::I64: return c.read<int64_t>("INT64 value");
    case GgufType::F64: return c.read<double>("FLOAT64 value");
    case GgufType::STRING: return c.string("STRING value");
    case GgufType::BOOL: {
      const uint64_t at = c.pos();
      const uint8_t b = c.read<uint8_t>("BOOL value");
      if (b > 1) c.fail(at, "BOOL value is " + std::to_string(b) + ", expected 0 or 1");
      return b == 1;
    }
    case GgufType::ARRAY: {
      if (depth >= kMaxArrayNesting) c.fail(c.pos(), "arrays nested deeper than " + std::to_string(kMaxArrayNesting));
      const uint64_t at = c.pos();
      const uint32_t et = c.read<uint32_t>("ARRAY element type");
      if (!known_type(et, c.narrow_lengths())) c.fail(at, "unknown ARRAY element type " + std::to_string(et) + version_note(c));
      const uint64_t count = c.length("ARRAY count");
      const GgufType element = static_cast<GgufType>(et);
      if (count > c.remaining() / min_encoded_size(element, c.narrow_lengths()))
        c.fail(at, "ARRAY of " + std::to_string(count) + " " + gguf_type_name(element) +
                       " cannot fit in the " + std::to_string(c.remaining()) + " bytes left");
      if (kv && depth == 0) kv->element_type = element, kv->count = count;
      if (arrays == GgufArrays::Summary) {
        skip_elements(c, element, count, depth);
        return nullptr;
      }
      nlohmann::json a = nlohmann::json::array();
      for (uint64_t i = 0; i < count; ++i) a.push_back(read_value(c, element, depth + 1, nullptr, arrays));
      return a;
    }
  }
  c.fail(c.pos(), "unknown value type");
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  static const char* names[] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                "BOOL",  "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
  const auto i = static_cast<uint32_t>(t);
  return i < 13 ? names[i] : "UNKNOWN";
}

const GgmlType* ggml_type(uint32_t id) {
  for (const auto& t : kGgmlTypes)
    if (t.id == id) return &t;
  return nullptr;
}

const GgufKv* GgufFile::find(const std::string& key) const {
  for (const auto& kv : kvs)
    if (kv.key == key) return &kv;
  return nullptr;
}

GgufFile parse_gguf(const uint8_t* bytes, uint64_t size, const std::string& path, GgufArrays arrays) {
  GgufFile f;
  Cursor c(bytes, size, path);
  c.need(4, "magic");
  if (std::memcmp(bytes, "GGUF", 4) != 0) c.fail(0, "not a GGUF file (magic is not 'GGUF')");
  c.read<uint32_t>("magic");
  f.version = c.read<uint32_t>("version");
  if (f.version < 1 || f.version > 3)
    c.fail(4, "GGUF version " + std::to_string(f.version) + " is not supported (1, 2 and 3 are)");
  const bool v1 = f.version == 1;  // 32-bit counts, string lengths, array counts and dimensions
  c.set_narrow_lengths(v1);
  f.tensor_count = c.length("tensor_count");
  const uint64_t kv_count_at = c.pos();
  f.kv_count = c.length("kv_count");
  // Each KV takes at least 13 bytes (9 in v1), each tensor info at least 24: counts the file cannot hold are lies.
  if (f.kv_count > c.remaining() / (v1 ? 9 : 13))
    c.fail(kv_count_at, "kv_count " + std::to_string(f.kv_count) + " cannot fit in the " + std::to_string(c.remaining()) + " bytes left");
  if (f.tensor_count > c.remaining() / 24)
    c.fail(8, "tensor_count " + std::to_string(f.tensor_count) + " cannot fit in the " + std::to_string(c.remaining()) + " bytes left");

  std::set<std::string> keys;
  for (uint64_t i = 0; i < f.kv_count; ++i) {
    GgufKv kv;
    kv.offset = c.pos();
    kv.key = c.string("KV key");
    // Keys and tensor names are identifiers that every output (JSON, the index) carries: the
    // specification's UTF-8, checked. String values are kept as stored (escape_invalid_utf8 where they are shown).
    if (!is_valid_utf8(kv.key)) c.fail(kv.offset, "KV key '" + escape_invalid_utf8(kv.key) + "' is not valid UTF-8");
    if (!keys.insert(kv.key).second) c.fail(kv.offset, "key '" + kv.key + "' appears twice");
    const uint64_t at = c.pos();
    const uint32_t t = c.read<uint32_t>("KV value type");
    if (!known_type(t, v1)) c.fail(at, "key '" + kv.key + "' has unknown value type " + std::to_string(t) + version_note(c));
    kv.type = static_cast<GgufType>(t);
    kv.value = read_value(c, kv.type, 0, &kv, arrays);
    f.kvs.push_back(std::move(kv));
  }
  if (const GgufKv* a = f.find("general.alignment")) {
    if (a->type != GgufType::U32) c.fail(a->offset, "general.alignment must be UINT32, is " + std::string(gguf_type_name(a->type)));
    const uint32_t v = a->value.get<uint32_t>();
    if (v == 0 || (v & (v - 1)) != 0) c.fail(a->offset, "general.alignment " + std::to_string(v) + " is not a power of two");
    f.alignment = v;
  }

  std::set<std::string> names;
  for (uint64_t i = 0; i < f.tensor_count; ++i) {
    GgufTensor t;
    t.info_offset = c.pos();
    t.name = c.string("tensor name");
    if (!is_valid_utf8(t.name)) c.fail(t.info_offset, "tensor name '" + escape_invalid_utf8(t.name) + "' is not valid UTF-8");
    if (!names.insert(t.name).second) c.fail(t.info_offset, "tensor '" + t.name + "' appears twice");
    const uint32_t n_dims = c.read<uint32_t>("tensor n_dims");
    if (n_dims == 0 || n_dims > kMaxDims)
      c.fail(t.info_offset, "tensor '" + t.name + "' has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    t.elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = v1 ? c.read<uint32_t>("tensor ne") : c.read<uint64_t>("tensor ne");
      if (n > static_cast<uint64_t>(INT64_MAX) || (n != 0 && t.elements > static_cast<uint64_t>(INT64_MAX) / n))
        c.fail(t.info_offset, "tensor '" + t.name + "': element count overflows");
      t.elements *= n;
      t.ne.push_back(n);
    }
    t.shape.assign(t.ne.rbegin(), t.ne.rend());
    const uint64_t type_at = c.pos();
    const uint32_t type_id = c.read<uint32_t>("tensor type");
    t.type = ggml_type(type_id);
    if (!t.type) c.fail(type_at, "tensor '" + t.name + "' has unknown ggml type " + std::to_string(type_id));
    if (t.ne[0] % t.type->block_size)
      c.fail(t.info_offset, "tensor '" + t.name + "': row length " + std::to_string(t.ne[0]) + " is not a multiple of " +
                                t.type->name + "'s block of " + std::to_string(t.type->block_size));
    t.bytes = t.elements / t.type->block_size * t.type->type_size;
    t.offset = c.read<uint64_t>("tensor offset");
    if (t.offset % f.alignment)
      c.fail(t.info_offset, "tensor '" + t.name + "': offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                                std::to_string(f.alignment));
    f.tensors.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment; every tensor must lie inside it.
  // A file without tensors may end before that padding: gguf-py writes llama.cpp's vocabulary-only
  // files so (the key-values, then nothing). Its empty data section starts at the end of the file, so
  // that data_section_offset never lies past it (the index hashes the bytes before it to identify the file).
  const uint64_t end_of_infos = c.pos();
  const uint64_t aligned = (end_of_infos + f.alignment - 1) / f.alignment * f.alignment;
  if (aligned > size && !f.tensors.empty())
    c.fail(end_of_infos, "the data section of " + std::to_string(f.tensors.size()) + " tensor(s) would start at " +
                             std::to_string(aligned) + " (after the tensor infos, padded to the alignment " +
                             std::to_string(f.alignment) + "), past the end of the file (size " + std::to_string(size) + ")");
  f.data_section_offset = std::min(aligned, size);
  const uint64_t data_bytes = size - f.data_section_offset;
  std::vector<const GgufTensor*> by_offset;
  for (auto& t : f.tensors) {
    if (t.offset > data_bytes || t.bytes > data_bytes - t.offset)
      c.fail(t.info_offset, "tensor '" + t.name + "' (" + std::to_string(t.bytes) + " bytes at data offset " +
                                std::to_string(t.offset) + ") runs past the end of the file (data section holds " +
                                std::to_string(data_bytes) + " bytes)");
    t.data_offset = f.data_section_offset + t.offset;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto a, auto b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->offset < by_offset[i - 1]->offset + by_offset[i - 1]->bytes && by_offset[i]->bytes > 0)
      c.fail(by_offset[i]->info_offset, "tensor '" + by_offset[i]->name + "' overlaps tensor '" + by_offset[i - 1]->name + "'");
  return f;
}

}  // namespace tmorph
