#include "formats/safetensors_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "formats/safetensors.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

std::string os_error(const std::string& path, const std::string& what) {
  return path + ": " + what + ": " + std::strerror(errno);
}

}  // namespace

SafetensorsWriter::SafetensorsWriter(std::string path, size_t buffer_bytes)
    : path_(std::move(path)), partial_path_(path_ + ".partial"), buffer_(buffer_bytes ? buffer_bytes : 1) {}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (state_ != State::Declaring && state_ != State::Finished) std::remove(partial_path_.c_str());
}

void SafetensorsWriter::require(State s, const char* call) const {
  if (state_ != s) throw Error(ErrorKind::Internal, path_ + ": SafetensorsWriter::" + call + " called out of order");
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) {
  require(State::Declaring, "set_metadata");
  metadata_[key] = value;
}

uint64_t SafetensorsWriter::add_tensor(const std::string& name, const std::string& dtype, const std::vector<uint64_t>& shape) {
  require(State::Declaring, "add_tensor");
  const std::string where = path_ + ": tensor '" + name + "'";
  if (name == "__metadata__") throw Error(ErrorKind::InvalidArgument, where + ": the name is reserved");
  if (!names_.insert(name).second) throw Error(ErrorKind::InvalidArgument, where + " is declared twice");
  const uint32_t bits = safetensors_dtype_bits(dtype);
  if (bits == 0) throw Error(ErrorKind::InvalidArgument, where + ": unknown safetensors dtype '" + dtype + "'");
  uint64_t elements = 1;
  for (uint64_t d : shape) {
    if (d != 0 && elements > UINT64_MAX / bits / d) throw Error(ErrorKind::InvalidArgument, where + ": byte size overflows 64 bits");
    elements *= d;
  }
  if (elements * bits % 8)
    throw Error(ErrorKind::InvalidArgument, where + ": " + std::to_string(elements) + " elements of " + dtype + " are not whole bytes");
  const uint64_t bytes = elements * bits / 8;
  if (data_bytes_ > UINT64_MAX - bytes) throw Error(ErrorKind::InvalidArgument, where + ": file size overflows 64 bits");
  tensors_.push_back({name, dtype, shape, data_bytes_, data_bytes_ + bytes});
  data_bytes_ += bytes;
  return bytes;
}

void SafetensorsWriter::write_header() {
  require(State::Declaring, "write_header");
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  if (!metadata_.empty()) doc["__metadata__"] = metadata_;
  for (const auto& t : tensors_) doc[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
  header_ = doc.dump();
  header_.append((8 - header_.size() % 8) % 8, ' ');
  if (header_.size() > kSafetensorsMaxHeaderBytes)
    throw Error(ErrorKind::InvalidArgument, path_ + ": header of " + std::to_string(header_.size()) + " bytes exceeds the 100 MB limit");

  fd_ = ::open(partial_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(ErrorKind::Io, os_error(partial_path_, "cannot create"));
  state_ = State::Writing;
  uint8_t length[8];
  const uint64_t n = header_.size();
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(n >> (8 * i));  // little-endian
  write_out(length, 8);
  write_out(header_.data(), header_.size());
}

void SafetensorsWriter::begin_tensor(const std::string& name) {
  require(State::Writing, "begin_tensor");
  if (current_ >= tensors_.size() || tensors_[current_].name != name)
    throw Error(ErrorKind::Internal, path_ + ": begin_tensor('" + name + "') but the next declared tensor is " +
                                         (current_ < tensors_.size() ? "'" + tensors_[current_].name + "'" : "none"));
  state_ = State::InTensor;
  written_ = 0;
}

void SafetensorsWriter::append(const void* data, size_t bytes) {
  require(State::InTensor, "append");
  const Declared& t = tensors_[current_];
  if (bytes > t.end - t.begin - written_)
    throw Error(ErrorKind::Internal, path_ + ": tensor '" + t.name + "' declared " + std::to_string(t.end - t.begin) +
                                         " bytes; appending " + std::to_string(bytes) + " after " + std::to_string(written_) + " overruns it");
  write_out(data, bytes);
  written_ += bytes;
}

void SafetensorsWriter::end_tensor() {
  require(State::InTensor, "end_tensor");
  const Declared& t = tensors_[current_];
  if (written_ != t.end - t.begin)
    throw Error(ErrorKind::Internal, path_ + ": tensor '" + t.name + "' declared " + std::to_string(t.end - t.begin) +
                                         " bytes but only " + std::to_string(written_) + " were appended");
  ++current_;
  state_ = State::Writing;
}

void SafetensorsWriter::finish() {
  require(State::Writing, "finish");
  if (current_ != tensors_.size())
    throw Error(ErrorKind::Internal, path_ + ": finish() with tensor '" + tensors_[current_].name + "' and " +
                                         std::to_string(tensors_.size() - current_ - 1) + " more never written");
  flush();
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) throw Error(ErrorKind::Io, os_error(partial_path_, "close failed"));
  if (std::rename(partial_path_.c_str(), path_.c_str()) != 0) throw Error(ErrorKind::Io, os_error(path_, "cannot rename " + partial_path_ + " to it"));
  state_ = State::Finished;
}

void SafetensorsWriter::write_out(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (bytes >= buffer_.size()) {  // large appends go straight to the file
    flush();
    write_fd(p, bytes);
    return;
  }
  if (bytes > buffer_.size() - buffered_) flush();
  std::memcpy(buffer_.data() + buffered_, p, bytes);
  buffered_ += bytes;
}

void SafetensorsWriter::flush() {
  write_fd(buffer_.data(), buffered_);
  buffered_ = 0;
}

void SafetensorsWriter::write_fd(const uint8_t* data, size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, data, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;  // a write that makes no progress: report it as an I/O error
    if (n <= 0) throw Error(ErrorKind::Io, os_error(partial_path_, "write failed"));
    data += n;
    bytes -= static_cast<size_t>(n);
  }
}

}  // namespace tmorph
