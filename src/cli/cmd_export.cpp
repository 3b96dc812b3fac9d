// tensormorph export PATH TENSOR -o OUT.npy: one tensor as a row-major .npy file, in the native dtype
// where numpy has one, bf16 and f8 widened exactly to float32. Streams in bounded chunks.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "checkpoint/open_checkpoint.h"
#include "cli/compute_flags.h"
#include "cli/output.h"
#include "core/npy.h"
#include "checkpoint/ggml_quantized.h"
#include "checkpoint/packed_dequantize.h"
#include "tensormorph/planner.h"
#include "cli/commands.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

struct ExportArgs {
  std::string path, tensor, out;
  bool json = false;
};

// Writes t's values as `n`-element chunks of the npy payload: dense dtypes natively (bf16/f8 widened
// exactly to float32, bool as 0/1).
void write_dense(std::ofstream& out, const Checkpoint& c, const CheckpointTensor& t, bool widen) {
  const size_t width = dtype_size(*t.dtype);
  const uint8_t* src = c.data(t);
  constexpr uint64_t kChunk = 1 << 20;  // elements per write
  std::vector<uint8_t> buffer;
  for (uint64_t first = 0; first < t.elements; first += kChunk) {
    const uint64_t n = std::min(kChunk, t.elements - first);
    if (widen) {
      buffer.resize(n * 4);
      for (uint64_t i = 0; i < n; ++i) {
        const float f = static_cast<float>(element_to_double(*t.dtype, src + (first + i) * width));
        std::memcpy(&buffer[i * 4], &f, 4);
      }
    } else if (*t.dtype == DType::BOOL) {  // numpy's bool is exactly 0 or 1
      buffer.resize(n);
      for (uint64_t i = 0; i < n; ++i) buffer[i] = src[first + i] ? 1 : 0;
    } else {
      buffer.assign(src + first * width, src + (first + n) * width);
    }
    out.write(reinterpret_cast<const char*>(buffer.data()), static_cast<std::streamsize>(buffer.size()));
  }
}

// A quantized tensor dequantized (placed by the planner) into float32, a few blocks at a time.
void write_dequantized(std::ofstream& out, const Checkpoint& c, const CheckpointTensor& t) {
  const auto rt = make_runtime(nullptr);
  const Planner planner = rt->planner();
  const QuantizedTensor q = quantized_tensor(*t.ggml_type, c.data(t), t.elements);
  const Placement pl = place_dequantize(planner, q);
  const uint64_t chunk = std::max<uint64_t>(1, (uint64_t{1} << 20) / q.block_elements) * q.block_elements;
  std::vector<float> values;
  for (uint64_t first = 0; first < t.elements; first += chunk) {
    const uint64_t n = std::min(chunk, t.elements - first);
    values.resize(n);
    dequantize_range(pl, q, first, n, values.data(), rt->threads);
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(n * sizeof(float)));
  }
}

// A packed tensor (GPTQ, AWQ, bitsandbytes, FP8 with scales, MXFP4) decoded into float32, a few rows
// at a time.
void write_packed(std::ofstream& out, const Checkpoint& c, const CheckpointTensor& t) {
  const auto rt = make_runtime(nullptr);
  const PackedDecoder decoder(c, t, rt->planner());
  const uint64_t rows = std::max<uint64_t>(8, (uint64_t{1} << 20) / std::max<uint64_t>(1, decoder.cols())) / 8 * 8;
  std::vector<float> values;
  for (uint64_t first = 0; first < decoder.rows(); first += rows) {
    const uint64_t n = std::min(rows, decoder.rows() - first);
    values.resize(n * decoder.cols());
    decoder.decode_rows(first, n, values.data(), rt->threads);
    out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  }
}

void run_export(const ExportArgs& a) {
  const Checkpoint c = open_checkpoint(a.path);
  const CheckpointTensor* t = nullptr;
  for (const auto& x : c.tensors)
    if (x.name == a.tensor) t = &x;
  if (!t) throw Error(ErrorKind::InvalidArgument, a.path + ": no tensor named '" + a.tensor + "'");
  if (!t->readable())
    throw Error(ErrorKind::Unavailable, a.tensor + " (" + t->stored_type + "): " + t->unavailable_reason);
  const bool decoded = t->dequantized();  // values computed from a quantized encoding
  bool widen = !t->dtype;  // dequantized values are float32
  const std::string descr = t->dtype ? npy_descr(*t->dtype, &widen) : "<f4";
  std::ofstream out(a.out, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::Io, a.out + ": cannot write");
  const std::string preamble = npy_preamble(descr, t->shape);
  out.write(preamble.data(), static_cast<std::streamsize>(preamble.size()));
  if (t->dtype) write_dense(out, c, *t, widen);
  else if (t->packed) write_packed(out, c, *t);
  else write_dequantized(out, c, *t);
  out.close();
  if (!out) throw Error(ErrorKind::Io, a.out + ": write failed");
  const std::string how = t->ggml_type ? " (" + t->stored_type + " dequantized to float32, bit-identical to ggml)"
                          : t->packed  ? " (" + t->stored_type + " decoded from its parts to float32)"
                          : widen      ? " (" + t->stored_type + " widened exactly to float32)"
                                       : "";
  if (a.json)
    print_json(nlohmann::json{{"tensor", a.tensor}, {"out", a.out}, {"descr", descr}, {"shape", t->shape},
                                {"widened_to_float32", widen && !decoded},
                                {"dequantized_from", decoded ? nlohmann::json(t->stored_type) : nlohmann::json(nullptr)}});
  else
    std::printf("wrote %s: %s %s%s\n", a.out.c_str(), a.tensor.c_str(), descr.c_str(), how.c_str());
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
