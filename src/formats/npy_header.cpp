#include "formats/npy_header.h"

#include <cstring>
#include <map>

#include "tensormorph/error.h"

namespace tmorph {

namespace {

constexpr uint64_t kMaxHeaderBytes = 1 << 20;

[[noreturn]] void bad(const std::string& where, uint64_t offset, const std::string& what) {
  throw Error(ErrorKind::BadInput, where + ": at byte " + std::to_string(offset) + ": " + what);
}

// A cursor over the header dict's text; offsets in errors count from the start of the .npy bytes.
class Literal {
 public:
  Literal(const char* text, uint64_t size, uint64_t base, const std::string& where) : s_(text), n_(size), base_(base), where_(where) {}

  void skip_space() {
    while (i_ < n_ && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool at(char c) {
    skip_space();
    return i_ < n_ && s_[i_] == c;
  }
  void expect(char c, const char* what) {
    if (!at(c)) fail(std::string("expected ") + what);
    ++i_;
  }
  std::string string() {
    skip_space();
    if (i_ >= n_ || (s_[i_] != '\'' && s_[i_] != '"')) fail("expected a quoted string");
    const char quote = s_[i_++];
    const uint64_t start = i_;
    while (i_ < n_ && s_[i_] != quote) {
      if (s_[i_] == '\\') fail("escapes in header strings are not part of the .npy format");
      ++i_;
    }
    if (i_ >= n_) fail("unterminated string");
    return std::string(s_ + start, s_ + i_++);
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      const size_t len = std::strlen(word);
      if (n_ - i_ >= len && std::memcmp(s_ + i_, word, len) == 0) {
        i_ += len;
        return value;
      }
    }
    fail("expected True or False");
  }
  uint64_t integer() {
    skip_space();
    const uint64_t start = i_;
    uint64_t v = 0;
    while (i_ < n_ && s_[i_] >= '0' && s_[i_] <= '9') {
      const uint64_t digit = static_cast<uint64_t>(s_[i_] - '0');
      if (v > (UINT64_MAX - digit) / 10) fail("a dimension that overflows 64 bits");
      v = v * 10 + digit;
      ++i_;
    }
    if (i_ == start) fail("expected a non-negative integer");
    if (i_ < n_ && s_[i_] == 'L') ++i_;  // Python 2's long suffix, as old numpy wrote it
    return v;
  }
  std::vector<uint64_t> tuple() {
    expect('(', "'(' starting the shape tuple");
    std::vector<uint64_t> dims;
    while (!at(')')) {
      dims.push_back(integer());
      if (dims.size() > 64) fail("more than 64 dimensions");
      if (!at(')')) expect(',', "',' or ')' in the shape tuple");
    }
    ++i_;
    return dims;
  }
  bool done() {
    skip_space();
    return i_ == n_;
  }
  [[noreturn]] void fail(const std::string& what) const { bad(where_, base_ + i_, "header dict: " + what); }

 private:
  const char* s_;
  uint64_t n_, base_;
  std::string where_;
  uint64_t i_ = 0;
};

uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t le32(const uint8_t* p) { return p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24; }

// The dtype of a type string, or why none.
void interpret_descr(NpyHeader& h, const std::string& where, uint64_t at) {
  const std::string& d = h.descr;
  if (d.size() < 2) bad(where, at, "descr '" + d + "' is not a numpy type string");
  const char order = d[0];
  const std::string code = d.substr(1);
  if (order != '<' && order != '>' && order != '|' && order != '=')
    throw Error(ErrorKind::BadInput, where + ": descr '" + d + "' does not start with a byte order (<, >, | or =)");
  if (code == "O") {
    h.element_size = 8;
    h.unavailable_reason = "an object array ('O'): its values are pickled Python objects, never unpickled (allow_pickle is never used)";
    return;
  }
  static const std::map<std::string, DType> kTypes = {
      {"f8", DType::F64}, {"f4", DType::F32}, {"f2", DType::F16}, {"i1", DType::I8},  {"i2", DType::I16},
      {"i4", DType::I32}, {"i8", DType::I64}, {"u1", DType::U8},  {"u2", DType::U16}, {"u4", DType::U32},
      {"u8", DType::U64}, {"b1", DType::BOOL}};
  const auto it = kTypes.find(code);
  if (it == kTypes.end()) {
    // Other kinds (complex, strings, datetimes, void): sized when the code says so, never read.
    size_t pos = 0;
    while (pos < code.size() && !(code[pos] >= '0' && code[pos] <= '9')) ++pos;
    uint64_t size = 0;
    for (size_t k = pos; k < code.size(); ++k) {
      if (code[k] < '0' || code[k] > '9' || size > (1u << 20)) bad(where, at, "descr '" + d + "' has no element size numpy writes");
      size = size * 10 + static_cast<uint64_t>(code[k] - '0');
    }
    if (pos == code.size() || size == 0) bad(where, at, "descr '" + d + "' has no element size");
    const char kind = code[0];
    if (kind == 'U') size *= 4;  // UCS-4 code points
    h.element_size = size;
    h.unavailable_reason = "no kernel for numpy type '" + d + "'";
    return;
  }
  h.element_size = dtype_size(it->second);
  if (order == '>' && h.element_size > 1) {
    h.unavailable_reason = "big-endian values ('" + d + "'): no kernel reads them in place";
    return;
  }
  h.dtype = it->second;
}

}  // namespace

bool looks_like_npy(const uint8_t* bytes, uint64_t size) { return size >= 6 && std::memcmp(bytes, "\x93NUMPY", 6) == 0; }

NpyHeader parse_npy_header(const uint8_t* bytes, uint64_t size, const std::string& where) {
  if (!looks_like_npy(bytes, size)) bad(where, 0, "expected the .npy magic \\x93NUMPY");
  if (size < 10) bad(where, size, "truncated before the header length (10 bytes at least)");
  NpyHeader h;
  h.major_version = bytes[6];
  uint64_t header_len = 0, prefix = 0;
  if (h.major_version == 1) {
    header_len = le16(bytes + 8);
    prefix = 10;
  } else if (h.major_version == 2 || h.major_version == 3) {
    if (size < 12) bad(where, size, "truncated before the 4-byte header length of a version " + std::to_string(h.major_version) + " file");
    header_len = le32(bytes + 8);
    prefix = 12;
  } else {
    bad(where, 6, "format version " + std::to_string(h.major_version) + "." + std::to_string(bytes[7]) + ": expected 1.0, 2.0 or 3.0");
  }
  if (header_len > kMaxHeaderBytes) bad(where, 8, "header length " + std::to_string(header_len) + " is over the 1 MiB this reader accepts");
  if (prefix + header_len > size)
    bad(where, prefix, "header of " + std::to_string(header_len) + " bytes runs past the end (" + std::to_string(size) + " bytes)");
  h.data_offset = prefix + header_len;

  Literal lit(reinterpret_cast<const char*>(bytes + prefix), header_len, prefix, where);
  lit.expect('{', "'{' starting the header dict");
  bool have_descr = false, have_order = false, have_shape = false;
  while (!lit.at('}')) {
    const std::string key = lit.string();
    lit.expect(':', "':' after a key");
    bool* seen = nullptr;
    if (key == "descr") {
      if (lit.at('[')) lit.fail("a structured dtype (a list descr): not read");
      h.descr = lit.string();
      seen = &have_descr;
    } else if (key == "fortran_order") {
      h.fortran_order = lit.boolean();
      seen = &have_order;
    } else if (key == "shape") {
      h.shape = lit.tuple();
      seen = &have_shape;
    } else {
      lit.fail("unexpected key '" + key + "' (expected descr, fortran_order and shape)");
    }
    if (*seen) lit.fail("key '" + key + "' given twice");
    *seen = true;
    if (!lit.at('}')) lit.expect(',', "',' or '}' after a value");
  }
  lit.expect('}', "'}'");
  if (!lit.done()) lit.fail("text after the header dict");
  if (!have_descr || !have_order || !have_shape) lit.fail("expected the keys descr, fortran_order and shape");

  interpret_descr(h, where, prefix);
  for (uint64_t d : h.shape) {
    if (d != 0 && h.elements > UINT64_MAX / d) bad(where, prefix, "shape's element count overflows 64 bits");
    h.elements *= d;
  }
  if (h.element_size && h.elements > UINT64_MAX / h.element_size) bad(where, prefix, "shape's byte count overflows 64 bits");
  h.data_bytes = h.elements * h.element_size;
  if (h.data_bytes > size - h.data_offset)
    bad(where, h.data_offset, "shape needs " + std::to_string(h.data_bytes) + " bytes of '" + h.descr + "' values, only " +
                                  std::to_string(size - h.data_offset) + " follow the header");
  return h;
}

}  // namespace tmorph
