// GGUF v3, written as a stream: header, metadata key/values, tensor infos, then each tensor's bytes in
// declaration order, so no more than one tensor is ever held by the caller. The reader is formats/gguf.h.
//
// File layout (little-endian), as the GGUF specification and gguf-py's GGUFWriter write it:
//   "GGUF", u32 version = 3, u64 tensor_count, u64 kv_count;
//   kv_count x (string key, u32 value type, value)    string = u64 byte length + bytes (no terminator);
//   tensor_count x (string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset)
//       ne is ggml's order (ne[0] the contiguous row, i.e. the row-major shape reversed); offset is relative to
//       the data section and a multiple of the alignment;
//   zero padding to the alignment (general.alignment, 32 unless a u32 key of that name says otherwise), then the
//   data section: each tensor's bytes, zero-padded to the alignment.
//
// Contract, in call order:
//   1. add_*() metadata keys (unique, non-empty) and add_tensor() every tensor, in the order its bytes will follow
//      (names unique and non-empty; the ggml type must be in formats/gguf.h's table; the row length a whole number
//      of its blocks). Returns the tensor's byte size.
//   2. write_header(): creates PATH.partial and writes everything up to the data section.
//   3. write_tensor(name, bytes, size) for each tensor in declaration order, with exactly its declared size.
//   4. finish(): checks every tensor was written, closes and renames PATH.partial to PATH.
// A writer destroyed before finish() removes PATH.partial, so PATH is only ever a complete file. OS failures throw
// Error(Io, "PATH: ..."); bad declarations throw Error(InvalidArgument) naming the key or tensor; calls out of order
// or sizes other than declared throw Error(Internal).
#pragma once

#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace tmorph {

class GgufWriter {
 public:
  explicit GgufWriter(std::string path);
  ~GgufWriter();
  GgufWriter(const GgufWriter&) = delete;
  GgufWriter& operator=(const GgufWriter&) = delete;

  void add_string(const std::string& key, const std::string& value);
  void add_u32(const std::string& key, uint32_t value);
  void add_u64(const std::string& key, uint64_t value);
  void add_f32(const std::string& key, float value);
  void add_bool(const std::string& key, bool value);
  // shape is row-major (as every other face of the project gives it); the file stores it reversed.
  uint64_t add_tensor(const std::string& name, uint32_t ggml_type, const std::vector<uint64_t>& shape);

  void write_header();
  void write_tensor(const std::string& name, const void* data, uint64_t bytes);
  void finish();

  const std::string& path() const { return path_; }
  uint32_t alignment() const { return alignment_; }

 private:
  struct Declared {
    std::string name;
    uint32_t type;
    std::vector<uint64_t> shape;
    uint64_t offset, bytes;
  };
  enum class State { Declaring, Writing, Finished };

  void add_key(const std::string& key, uint32_t value_type);  // the key and its type into kvs_
  void require(State s, const char* call) const;
  void put(const void* data, uint64_t bytes);
  void pad_to_alignment(uint64_t written);

  std::string path_, partial_path_;
  std::string kvs_;  // the serialized key/values
  uint64_t kv_count_ = 0;
  std::set<std::string> keys_, names_;
  std::vector<Declared> tensors_;
  uint32_t alignment_ = 32;
  std::ofstream out_;
  State state_ = State::Declaring;
  size_t next_ = 0;  // the tensor write_tensor() expects next
};

}  // namespace tmorph
