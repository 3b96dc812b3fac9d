// GGUF v2/v3: header, every key/value type (nested arrays included), tensor infos and alignment,
// read with every count, length and offset checked against the file before it is used: a hostile
// header yields a precise error naming the file, the byte offset and the field, never a crash or an
// allocation sized by the file's claims.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tensormorph/dtype.h"

namespace tmorph {

// GGUF value types, numbered as in the specification.
enum class GgufType : uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9,
  U64 = 10, I64 = 11, F64 = 12,
};
const char* gguf_type_name(GgufType t);  // "UINT8", ..., "ARRAY" (gguf-py's names)

struct GgufKv {
  std::string key;
  uint64_t offset = 0;                // file offset of the key's length field
  GgufType type = GgufType::U8;
  GgufType element_type = GgufType::U8;  // arrays only
  uint64_t count = 0;                 // arrays only
  nlohmann::json value;               // numbers exact (f32 widened to double), strings (bytes as stored, not
                                      // always UTF-8: escape_invalid_utf8 before dumping), nested arrays
                                      // (null for arrays parsed with GgufArrays::Summary)
};

// A ggml tensor type: its block layout. Types without a table entry are refused by name/id.
struct GgmlType {
  uint32_t id;
  const char* name;
  uint32_t block_size;   // elements per block
  uint32_t type_size;    // bytes per block
  std::optional<DType> dense;  // the dtype whose kernels read it directly (F32, F16, BF16, ints, F64)
};
const GgmlType* ggml_type(uint32_t id);

struct GgufTensor {
  std::string name;
  uint64_t info_offset = 0;          // file offset of the tensor-info record
  const GgmlType* type = nullptr;
  std::vector<uint64_t> ne;          // ggml order: ne[0] is the contiguous row length
  std::vector<uint64_t> shape;       // row-major: reversed ne
  uint64_t elements = 0;
  uint64_t bytes = 0;
  uint64_t offset = 0;               // relative to the data section
  uint64_t data_offset = 0;          // absolute
};

struct GgufFile {
  uint32_t version = 0;
  uint64_t tensor_count = 0, kv_count = 0;
  uint32_t alignment = 32;
  uint64_t data_section_offset = 0;  // at most the file's size: the end of the tensor infos padded to the
                                     // alignment, or the end of the file when a file without tensors ends
                                     // before that padding (llama.cpp's vocabulary-only files)
  std::vector<GgufKv> kvs;
  std::vector<GgufTensor> tensors;
  const GgufKv* find(const std::string& key) const;
};

// Values: every array's elements as JSON. Summary: arrays are validated exactly the same way (types,
// bounds, BOOL bytes, nesting) but only their element type and count are kept (value is null); opening a
// checkpoint needs no more, and a tokenizer's 100k-string arrays then cost no allocation.
enum class GgufArrays { Values, Summary };

// Parses `size` bytes of a GGUF file. Throws tmorph::Error(BadInput) naming `path` and the offset; keys and
// tensor names must be valid UTF-8.
GgufFile parse_gguf(const uint8_t* bytes, uint64_t size, const std::string& path, GgufArrays arrays = GgufArrays::Values);

}  // namespace tmorph
