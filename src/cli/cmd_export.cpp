// tensormorph export PATH TENSOR -o OUT.npy: one tensor as a row-major .npy file, in the native dtype
// where numpy has one, bf16 and f8 widened exactly to float32. Streams in bounded chunks.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

struct ExportArgs {
  std::string path, tensor, out;
  bool json = false;
};

// numpy's type string for a dtype, and whether values must be widened to float32 on the way out.
std::string npy_descr(DType t, bool* widen) {
  *widen = false;
  switch (t) {
    case DType::F64: return "<f8";
    case DType::F32: return "<f4";
    case DType::F16: return "<f2";
    case DType::I8: return "|i1";
    case DType::I16: return "<i2";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
    case DType::U8: return "|u1";
    case DType::U16: return "<u2";
    case DType::U32: return "<u4";
    case DType::U64: return "<u8";
    case DType::BOOL: return "|b1";
    default: *widen = true; return "<f4";  // bf16, f8: every value is exactly a float32
  }
}

// The .npy v1.0 preamble: magic, version, header length, then the header dict padded with spaces and
// a newline so the data starts at a multiple of 64 bytes.
std::string npy_preamble(const std::string& descr, const std::vector<uint64_t>& shape) {
  std::string dims;
  for (uint64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1) dims.resize(dims.size() - 1);  // "(2, 3)" but "(5,)"
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t unpadded = 10 + header.size() + 1;
  header += std::string((64 - unpadded % 64) % 64, ' ') + "\n";
  if (header.size() > 65535) throw Error(ErrorKind::InvalidArgument, "export: shape too long for a .npy v1.0 header");
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  return out + header;
}

void run_export(const ExportArgs& a) {
  const Checkpoint c = open_checkpoint(a.path);
  const CheckpointTensor* t = nullptr;
  for (const auto& x : c.tensors)
    if (x.name == a.tensor) t = &x;
  if (!t) throw Error(ErrorKind::InvalidArgument, a.path + ": no tensor named '" + a.tensor + "'");
  if (!t->dtype) throw Error(ErrorKind::Unavailable, a.tensor + " (" + t->stored_type + "): " + t->unavailable_reason);
  bool widen = false;
  const std::string descr = npy_descr(*t->dtype, &widen);
  std::ofstream out(a.out, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::Io, a.out + ": cannot write");
  const std::string preamble = npy_preamble(descr, t->shape);
  out.write(preamble.data(), static_cast<std::streamsize>(preamble.size()));
  const size_t width = dtype_size(*t->dtype);
  const uint8_t* src = c.data(*t);
  constexpr uint64_t kChunk = 1 << 20;  // elements per write
  std::vector<uint8_t> buffer;
  for (uint64_t first = 0; first < t->elements; first += kChunk) {
    const uint64_t n = std::min(kChunk, t->elements - first);
    if (widen) {
      buffer.resize(n * 4);
      for (uint64_t i = 0; i < n; ++i) {
        const float f = static_cast<float>(element_to_double(*t->dtype, src + (first + i) * width));
        std::memcpy(&buffer[i * 4], &f, 4);
      }
    } else if (*t->dtype == DType::BOOL) {  // numpy's bool is exactly 0 or 1
      buffer.resize(n);
      for (uint64_t i = 0; i < n; ++i) buffer[i] = src[first + i] ? 1 : 0;
    } else {
      buffer.assign(src + first * width, src + (first + n) * width);
    }
    out.write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(buffer.size()));
  }
  out.close();
  if (!out) throw Error(ErrorKind::Io, a.out + ": write failed");
  if (a.json)
    std::cout << nlohmann::json{{"tensor", a.tensor}, {"out", a.out}, {"descr", descr}, {"shape", t->shape},
                                {"widened_to_float32", widen}}.dump(2) << "\n";
  else
    std::printf("wrote %s: %s %s%s\n", a.out.c_str(), a.tensor.c_str(), descr.c_str(),
                widen ? (" (" + t->stored_type + " widened exactly to float32)").c_str() : "");
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export", "write one tensor as a row-major .npy file");
  cmd->add_option("path", args->path, "checkpoint: file, shard directory, index JSON or GGUF split shard")->required();
  cmd->add_option("tensor", args->tensor, "tensor name")->required();
  cmd->add_option("-o,--out", args->out, "output .npy file")->required();
  cmd->add_flag("--json", args->json, "print one JSON document");
  cmd->callback([args] { run_export(*args); });
}

}  // namespace tmorph::cli
