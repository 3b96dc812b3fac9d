#include "formats/gguf_writer.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "formats/gguf.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

template <typename T>
void append_le(std::string& s, T v) {
  static_assert(std::endian::native == std::endian::little, "GGUF is little-endian; this writer assumes a little-endian host");
  char b[sizeof v];
  std::memcpy(b, &v, sizeof v);
  s.append(b, sizeof v);
}

void append_string(std::string& s, const std::string& v) {
  append_le<uint64_t>(s, v.size());
  s += v;
}

}  // namespace

GgufWriter::GgufWriter(std::string path) : path_(std::move(path)), partial_path_(path_ + ".partial") {}

GgufWriter::~GgufWriter() {
  if (state_ == State::Writing) {
    out_.close();
    std::remove(partial_path_.c_str());
  }
}

void GgufWriter::require(State s, const char* call) const {
  if (state_ != s) throw Error(ErrorKind::Internal, path_ + ": GgufWriter::" + call + " called out of order");
}

void GgufWriter::add_key(const std::string& key, uint32_t value_type) {
  require(State::Declaring, "add_*");
  if (key.empty()) throw Error(ErrorKind::InvalidArgument, path_ + ": a metadata key is empty");
  if (!keys_.insert(key).second) throw Error(ErrorKind::InvalidArgument, path_ + ": metadata key '" + key + "' is added twice");
  append_string(kvs_, key);
  append_le<uint32_t>(kvs_, value_type);
  ++kv_count_;
}

void GgufWriter::add_string(const std::string& key, const std::string& value) {
  add_key(key, static_cast<uint32_t>(GgufType::STRING));
  append_string(kvs_, value);
}

void GgufWriter::add_u32(const std::string& key, uint32_t value) {
  if (key == "general.alignment" && (value == 0 || !std::has_single_bit(value)))
    throw Error(ErrorKind::InvalidArgument, path_ + ": general.alignment " + std::to_string(value) + " is not a power of two");
  add_key(key, static_cast<uint32_t>(GgufType::U32));
  append_le<uint32_t>(kvs_, value);
  if (key == "general.alignment") alignment_ = value;
}

void GgufWriter::add_u64(const std::string& key, uint64_t value) {
  add_key(key, static_cast<uint32_t>(GgufType::U64));
  append_le<uint64_t>(kvs_, value);
}

void GgufWriter::add_f32(const std::string& key, float value) {
  add_key(key, static_cast<uint32_t>(GgufType::F32));
  append_le<float>(kvs_, value);
}

void GgufWriter::add_bool(const std::string& key, bool value) {
  add_key(key, static_cast<uint32_t>(GgufType::BOOL));
  append_le<uint8_t>(kvs_, value ? 1 : 0);
}

uint64_t GgufWriter::add_tensor(const std::string& name, uint32_t type, const std::vector<uint64_t>& shape) {
  require(State::Declaring, "add_tensor");
  const std::string where = path_ + ": tensor '" + name + "'";
  if (name.empty()) throw Error(ErrorKind::InvalidArgument, path_ + ": a tensor name is empty");
  if (!names_.insert(name).second) throw Error(ErrorKind::InvalidArgument, where + " is declared twice");
  const GgmlType* t = ggml_type(type);
  if (!t) throw Error(ErrorKind::InvalidArgument, where + ": ggml type " + std::to_string(type) + " is not one this project reads");
  if (shape.empty() || shape.size() > 4) throw Error(ErrorKind::InvalidArgument, where + ": GGUF takes 1 to 4 dimensions");
  uint64_t elements = 1;
  for (uint64_t d : shape) {
    if (d == 0 || elements > UINT64_MAX / d) throw Error(ErrorKind::InvalidArgument, where + ": a dimension is 0 or the size overflows");
    elements *= d;
  }
  if (shape.back() % t->block_size)
    throw Error(ErrorKind::InvalidArgument, where + ": row length " + std::to_string(shape.back()) + " is not a multiple of " +
                                                t->name + "'s " + std::to_string(t->block_size) + "-value blocks");
  const uint64_t bytes = elements / t->block_size * t->type_size;
  tensors_.push_back({name, type, shape, 0, bytes});
  return bytes;
}

void GgufWriter::put(const void* data, uint64_t bytes) {
  out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out_) throw Error(ErrorKind::Io, partial_path_ + ": write failed: " + std::strerror(errno));
}

void GgufWriter::pad_to_alignment(uint64_t written) {
  static const char zeros[256] = {};
  for (uint64_t pad = (alignment_ - written % alignment_) % alignment_; pad > 0;) {
    const uint64_t n = pad < sizeof zeros ? pad : sizeof zeros;
    put(zeros, n);
    pad -= n;
  }
}

void GgufWriter::write_header() {
  require(State::Declaring, "write_header");
  std::string head = "GGUF";
  append_le<uint32_t>(head, 3);
  append_le<uint64_t>(head, tensors_.size());
  append_le<uint64_t>(head, kv_count_);
  head += kvs_;
  uint64_t offset = 0;
  for (auto& t : tensors_) {
    t.offset = offset;
    offset += (t.bytes + alignment_ - 1) / alignment_ * alignment_;
    append_string(head, t.name);
    append_le<uint32_t>(head, static_cast<uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) append_le<uint64_t>(head, *d);  // ggml order: ne[0] = row
    append_le<uint32_t>(head, t.type);
    append_le<uint64_t>(head, t.offset);
  }
  out_.open(partial_path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw Error(ErrorKind::Io, partial_path_ + ": cannot create: " + std::strerror(errno));
  state_ = State::Writing;
  put(head.data(), head.size());
  pad_to_alignment(head.size());
}

void GgufWriter::write_tensor(const std::string& name, const void* data, uint64_t bytes) {
  require(State::Writing, "write_tensor");
  if (next_ >= tensors_.size() || tensors_[next_].name != name)
    throw Error(ErrorKind::Internal, path_ + ": tensor '" + name + "' written out of declaration order");
  if (bytes != tensors_[next_].bytes)
    throw Error(ErrorKind::Internal, path_ + ": tensor '" + name + "' is " + std::to_string(tensors_[next_].bytes) +
                                         " bytes, not " + std::to_string(bytes));
  put(data, bytes);
  pad_to_alignment(bytes);
  ++next_;
}

void GgufWriter::finish() {
  require(State::Writing, "finish");
  if (next_ != tensors_.size())
    throw Error(ErrorKind::Internal, path_ + ": finish() with " + std::to_string(tensors_.size() - next_) + " tensor(s) not written");
  out_.close();
  if (!out_) throw Error(ErrorKind::Io, partial_path_ + ": close failed: " + std::strerror(errno));
  std::error_code ec;
  std::filesystem::rename(partial_path_, path_, ec);
  if (ec) throw Error(ErrorKind::Io, path_ + ": cannot rename " + partial_path_ + " to it: " + ec.message());
  state_ = State::Finished;
}

}  // namespace tmorph
