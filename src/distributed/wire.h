// Byte strings for messages between ranks: fixed-width values in the host's byte order (every rank of
// a job runs the same build on the same architecture; little-endian hosts only, checked here), strings
// and vectors with a 64-bit length first. The reader checks every length against what is left and
// throws Error(BadInput) naming the message and the offset instead of reading past the end.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "tensormorph/error.h"

namespace tmorph {

static_assert(std::endian::native == std::endian::little, "messages between ranks assume little-endian hosts");

class WireWriter {
 public:
  template <class T>
  WireWriter& put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    append(&v, sizeof(T));
    return *this;
  }
  WireWriter& put_string(const std::string& s) {
    put<uint64_t>(s.size());
    append(s.data(), s.size());
    return *this;
  }
  template <class T>
  WireWriter& put_vector(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    put<uint64_t>(v.size());
    append(v.data(), v.size() * sizeof(T));
    return *this;
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  void append(const void* p, size_t n) {
    if (n == 0) return;
    const size_t at = bytes_.size();
    bytes_.resize(at + n);
    std::memcpy(bytes_.data() + at, p, n);
  }
  std::vector<uint8_t> bytes_;
};

class WireReader {
 public:
  // what: names the message in errors ("result from rank 2").
  WireReader(const std::vector<uint8_t>& bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}

  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T), "a value");
    T v;
    std::memcpy(&v, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string get_string() {
    const uint64_t n = get<uint64_t>();
    need(n, "a string");
    std::string s(reinterpret_cast<const char*>(bytes_.data() + at_), static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    return s;
  }
  template <class T>
  std::vector<T> get_vector() {
    const uint64_t n = get<uint64_t>();
    if (n > (bytes_.size() - at_) / sizeof(T)) need(bytes_.size() - at_ + 1, "a vector");
    std::vector<T> v(static_cast<size_t>(n));
    if (n) std::memcpy(v.data(), bytes_.data() + at_, static_cast<size_t>(n) * sizeof(T));
    at_ += static_cast<size_t>(n) * sizeof(T);
    return v;
  }
  // Throws unless every byte was read (a message longer than its contents is as wrong as a short one).
  void expect_end() const {
    if (at_ != bytes_.size())
      throw Error(ErrorKind::BadInput, what_ + ": " + std::to_string(bytes_.size() - at_) + " unexpected bytes after offset " +
                                           std::to_string(at_));
  }
  const std::string& what() const { return what_; }

 private:
  void need(uint64_t n, const char* item) const {
    if (n > bytes_.size() - at_)
      throw Error(ErrorKind::BadInput, what_ + ": truncated at offset " + std::to_string(at_) + " (" + item + " of " +
                                           std::to_string(n) + " bytes, " + std::to_string(bytes_.size() - at_) + " left)");
  }
  const std::vector<uint8_t>& bytes_;
  std::string what_;
  size_t at_ = 0;
};

}  // namespace tmorph
