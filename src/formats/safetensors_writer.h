// safetensors, written as a stream: the header first, then every tensor's bytes in declaration order,
// so a file of any size goes out without ever being held in memory.
//
// Contract, in call order:
//   1. add_tensor(name, dtype, shape) for every tensor, in the order its bytes will follow. Names are
//      unique, not "__metadata__"; dtype is a safetensors dtype name ("BF16", "F32", ...). Offsets are
//      assigned contiguously from 0 in that order. set_metadata() adds __metadata__ strings.
//   2. write_header(): creates PATH.partial and writes the u64 little-endian header length and the
//      JSON header ({"__metadata__": ..., then the tensors in declaration order}) padded with spaces to a
//      multiple of 8 bytes, as the reference library does, so the data section starts 8-byte aligned.
//   3. For each tensor in declaration order: begin_tensor(name), append() its bytes (any number of
//      calls, any sizes), end_tensor(). append() past the declared size, end_tensor() short of it, or a
//      begin_tensor() out of order throws Error(Internal): a caller bug, never a malformed file.
//   4. finish(): checks every tensor was written, flushes, closes and renames PATH.partial to PATH.
// A writer destroyed before finish() removes PATH.partial, so PATH is only ever a complete file that
// parse_safetensors() accepts. OS failures throw Error(Io, "PATH: ..."); bad declarations (unknown
// dtype, duplicate name, size overflow) throw Error(InvalidArgument).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tmorph {

class SafetensorsWriter {
 public:
  // Writes go through an internal buffer of `buffer_bytes`; appends at least that large bypass it.
  explicit SafetensorsWriter(std::string path, size_t buffer_bytes = size_t{8} << 20);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  void set_metadata(const std::string& key, const std::string& value);
  // Declares the next tensor; returns its size in bytes.
  uint64_t add_tensor(const std::string& name, const std::string& dtype, const std::vector<uint64_t>& shape);

  void write_header();
  void begin_tensor(const std::string& name);
  void append(const void* data, size_t bytes);
  void end_tensor();
  void finish();

  const std::string& path() const { return path_; }
  uint64_t data_bytes() const { return data_bytes_; }          // sum of declared tensor sizes
  uint64_t header_bytes() const { return header_.size(); }     // JSON length incl. padding; after write_header

 private:
  struct Declared {
    std::string name, dtype;
    std::vector<uint64_t> shape;
    uint64_t begin = 0, end = 0;  // byte offsets in the data section
  };
  enum class State { Declaring, Writing, InTensor, Finished };

  void require(State s, const char* call) const;
  void write_out(const void* data, size_t bytes);  // through the buffer
  void flush();
  void write_fd(const uint8_t* data, size_t bytes);

  std::string path_, partial_path_;
  std::map<std::string, std::string> metadata_;
  std::vector<Declared> tensors_;
  std::set<std::string> names_;
  uint64_t data_bytes_ = 0;
  std::string header_;
  std::vector<uint8_t> buffer_;
  size_t buffered_ = 0;
  int fd_ = -1;
  State state_ = State::Declaring;
  size_t current_ = 0;        // index of the tensor being written, or next to be begun
  uint64_t written_ = 0;      // bytes of the current tensor appended so far
};

}  // namespace tmorph
