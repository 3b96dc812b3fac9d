#include "formats/safetensors.h"

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/json_bounded.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

struct DtypeEntry {
  const char* name;
  uint32_t bits;
  std::optional<DType> dtype;
};

// The dtypes of the current safetensors specification. Those without a kernel here are recognised
// (and their sizes checked) but carry no DType.
const DtypeEntry kDtypes[] = {
    {"BOOL", 8, DType::BOOL},           {"U8", 8, DType::U8},
    {"I8", 8, DType::I8},               {"F8_E4M3", 8, DType::F8_E4M3FN},
    {"F8_E5M2", 8, DType::F8_E5M2},     {"F8_E8M0", 8, std::nullopt},
    {"F8_E4M3FNUZ", 8, std::nullopt},   {"F8_E5M2FNUZ", 8, std::nullopt},
    {"I16", 16, DType::I16},            {"U16", 16, DType::U16},
    {"F16", 16, DType::F16},            {"BF16", 16, DType::BF16},
    {"I32", 32, DType::I32},            {"U32", 32, DType::U32},
    {"F32", 32, DType::F32},            {"F64", 64, DType::F64},
    {"I64", 64, DType::I64},            {"U64", 64, DType::U64},
    {"F4", 4, std::nullopt},            {"F6_E2M3", 6, std::nullopt},
    {"F6_E3M2", 6, std::nullopt},
};

const DtypeEntry* find_dtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::BadInput, path + ": " + what);
}

uint64_t as_u64(const nlohmann::json& v, const std::string& path, const std::string& field) {
  if (!v.is_number_unsigned()) bad(path, field + " must be a non-negative integer, got " + json_brief(v));
  return v.get<uint64_t>();
}

}  // namespace

uint32_t safetensors_dtype_bits(const std::string& name) {
  const DtypeEntry* d = find_dtype(name);
  return d ? d->bits : 0;
}

SafetensorsHeader parse_safetensors(const uint8_t* bytes, uint64_t size, const std::string& path) {
  SafetensorsHeader h;
  if (size < 8) bad(path, "file is " + std::to_string(size) + " bytes; a safetensors file starts with an 8-byte header length");
  std::memcpy(&h.header_bytes, bytes, 8);  // little-endian on every platform we build for
  if (h.header_bytes > kSafetensorsMaxHeaderBytes)
    bad(path, "header length " + std::to_string(h.header_bytes) + " at offset 0 exceeds the 100 MB limit");
  if (h.header_bytes > size - 8)
    bad(path, "header length " + std::to_string(h.header_bytes) + " at offset 0 runs past the end of the file (" +
                  std::to_string(size) + " bytes)");
  h.data_offset = 8 + h.header_bytes;
  h.data_bytes = size - h.data_offset;

  // Duplicate keys would be silently merged by a JSON object: the parser refuses them.
  JsonLimits limits;
  limits.duplicate_key_message = [](const std::string& key, size_t depth) {
    return depth == 1 ? "header names tensor '" + key + "' twice" : "header repeats key '" + key + "' within one object";
  };
  const std::string_view text(reinterpret_cast<const char*>(bytes + 8), h.header_bytes);
  const nlohmann::json doc = parse_json_bounded(text, path + ": header (bytes 8.." + std::to_string(h.data_offset) + ")", limits);
  if (!doc.is_object()) bad(path, "header must be a JSON object");

  for (const auto& [key, value] : doc.items()) {
    if (key == "__metadata__") {
      // The reference library reads __metadata__ as an optional map: null (as MLX writes adapters) is none.
      if (value.is_null()) continue;
      if (!value.is_object()) bad(path, "__metadata__ must be an object of strings (or null), got " + json_brief(value));
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) bad(path, "__metadata__['" + mk + "'] must be a string, got " + json_brief(mv));
        h.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + key + "'";
    if (!value.is_object()) bad(path, where + " must be an object with dtype, shape and data_offsets");
    for (const char* field : {"dtype", "shape", "data_offsets"})
      if (!value.contains(field)) bad(path, where + " has no " + field);
    SafetensorsTensor t;
    t.name = key;
    if (!value["dtype"].is_string()) bad(path, where + ": dtype must be a string");
    t.dtype_name = value["dtype"].get<std::string>();
    const DtypeEntry* dt = find_dtype(t.dtype_name);
    if (!dt) bad(path, where + ": unknown dtype '" + t.dtype_name + "'");
    t.dtype = dt->dtype;
    if (!value["shape"].is_array()) bad(path, where + ": shape must be an array");
    t.elements = 1;
    for (size_t i = 0; i < value["shape"].size(); ++i) {
      const uint64_t d = as_u64(value["shape"][i], path, where + " shape[" + std::to_string(i) + "]");
      if (d != 0 && t.elements > UINT64_MAX / d) bad(path, where + ": shape's element count overflows 64 bits");
      t.elements *= d;
      t.shape.push_back(d);
    }
    const auto& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2) bad(path, where + ": data_offsets must be [begin, end]");
    t.begin = as_u64(offsets[0], path, where + " data_offsets[0]");
    t.end = as_u64(offsets[1], path, where + " data_offsets[1]");
    if (t.end < t.begin) bad(path, where + ": data_offsets end " + std::to_string(t.end) + " is before begin " + std::to_string(t.begin));
    if (t.elements > UINT64_MAX / dt->bits) bad(path, where + ": byte size overflows 64 bits");
    const uint64_t bits = t.elements * dt->bits;
    if (bits % 8) bad(path, where + ": " + std::to_string(t.elements) + " elements of " + t.dtype_name + " are not a whole number of bytes");
    if (bits / 8 != t.end - t.begin)
      bad(path, where + ": shape needs " + std::to_string(bits / 8) + " bytes of " + t.dtype_name + ", data_offsets span " +
                    std::to_string(t.end - t.begin));
    h.tensors.push_back(std::move(t));
  }

  // Offsets: sorted, contiguous from 0, ending exactly at the end of the file.
  std::sort(h.tensors.begin(), h.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  for (auto& t : h.tensors) {
    if (t.begin < expected) bad(path, "tensor '" + t.name + "' (bytes " + std::to_string(t.begin) + ".." + std::to_string(t.end) + ") overlaps the tensor before it, which ends at " + std::to_string(expected));
    if (t.begin > expected) bad(path, "tensor '" + t.name + "' starts at data byte " + std::to_string(t.begin) + ", leaving a hole after byte " + std::to_string(expected));
    expected = t.end;
    t.file_offset = h.data_offset + t.begin;
  }
  if (expected != h.data_bytes)
    bad(path, "the data section holds " + std::to_string(h.data_bytes) + " bytes but the tensors cover " + std::to_string(expected) +
                  (expected > h.data_bytes ? " (file truncated?)" : " (trailing bytes)"));
  return h;
}

}  // namespace tmorph
