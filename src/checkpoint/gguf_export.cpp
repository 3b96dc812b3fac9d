#include "checkpoint/gguf_export.h"

#include <bit>
#include <cstring>
#include <type_traits>

#include "checkpoint/ggml_quantize.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "support/thread_pool.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

constexpr uint32_t kF32 = 0, kF16 = 1, kQ5_0 = 6, kQ8_0 = 8, kQ4_K = 12;  // ggml type ids

// Row `row` of a dense F32/F16/BF16 tensor's row-major bytes, as float32 (exact: every value is a float).
void widen_row(DType dtype, const uint8_t* data, uint64_t row, uint64_t len, float* out) {
  switch (dtype) {
    case DType::F32:
      std::memcpy(out, data + row * len * 4, len * 4);
      return;
    case DType::F16:
    case DType::BF16:
      for (uint64_t i = 0; i < len; ++i) {
        uint16_t h;
        std::memcpy(&h, data + (row * len + i) * 2, 2);
        out[i] = dtype == DType::F16 ? fp16_bits_to_f32(h) : std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
      }
      return;
    default:
      throw Error(ErrorKind::Internal, "widen_row: not a float dtype");
  }
}

// One row of `len` float32 values as `type`'s bytes.
void encode_row(uint32_t type, const float* x, uint64_t len, uint8_t* out) {
  switch (type) {
    case kF32:
      std::memcpy(out, x, len * 4);
      return;
    case kF16:
      for (uint64_t i = 0; i < len; ++i) {
        const uint16_t h = f32_to_fp16_bits(x[i]);
        std::memcpy(out + 2 * i, &h, 2);
      }
      return;
    case kQ8_0: return quantize_q8_0(x, len, out);
    case kQ5_0: return quantize_q5_0(x, len, out);
    case kQ4_K: return quantize_q4_k(x, len, out);
    default: throw Error(ErrorKind::Internal, "encode_row: ggml type " + std::to_string(type));
  }
}

void add_metadata(GgufWriter& w, const GgufMetadataValue& kv) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) w.add_string(kv.key, v);
        else if constexpr (std::is_same_v<T, uint32_t>) w.add_u32(kv.key, v);
        else if constexpr (std::is_same_v<T, uint64_t>) w.add_u64(kv.key, v);
        else if constexpr (std::is_same_v<T, float>) w.add_f32(kv.key, v);
        else w.add_bool(kv.key, v);
      },
      kv.value);
}

}  // namespace

uint32_t gguf_export_type(uint32_t target, const std::vector<uint64_t>& shape) {
  if (target != kQ8_0 && target != kQ4_K)
    throw Error(ErrorKind::InvalidArgument, "quantized GGUF: target type " + std::to_string(target) + " is not Q8_0 (8) or Q4_K (12)");
  if (shape.size() < 2) return kF32;
  const uint64_t row = shape.back();
  if (row % ggml_type(target)->block_size == 0) return target;
  if (target == kQ4_K && row % 32 == 0) return kQ5_0;
  return kF16;
}

std::vector<GgufExported> write_quantized_gguf(const Checkpoint& c, const std::string& path, uint32_t target,
                                               const std::vector<GgufMetadataValue>& metadata, ThreadPool& pool) {
  GgufWriter w(path);
  for (const auto& kv : metadata) add_metadata(w, kv);
  std::vector<GgufExported> out;
  std::vector<uint32_t> types;
  for (const auto& t : c.tensors) {
    const bool float_dense = t.dtype && !t.dequantized() &&
                             (*t.dtype == DType::F32 || *t.dtype == DType::F16 || *t.dtype == DType::BF16);
    if (!float_dense || t.shape.empty())
      throw Error(ErrorKind::InvalidArgument, path + ": tensor '" + t.name + "' (" + t.stored_type +
                                                  ") is not a dense F32, F16 or BF16 tensor with a shape; only those are quantized");
    types.push_back(gguf_export_type(target, t.shape));
    w.add_tensor(t.name, types.back(), t.shape);
    out.push_back({t.name, ggml_type(types.back())->name, t.shape});
  }
  w.write_header();
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    const CheckpointTensor& t = c.tensors[i];
    const GgmlType& type = *ggml_type(types[i]);
    const uint64_t len = t.shape.back(), rows = t.elements / len, row_bytes = len / type.block_size * type.type_size;
    bytes.resize(rows * row_bytes);
    const uint8_t* data = c.data(t);
    pool.parallel_for(rows, [&](uint64_t r0, uint64_t r1, unsigned) {
      std::vector<float> x(len);
      for (uint64_t r = r0; r < r1; ++r) {
        widen_row(*t.dtype, data, r, len, x.data());
        encode_row(types[i], x.data(), len, bytes.data() + r * row_bytes);
      }
    });
    w.write_tensor(t.name, bytes.data(), bytes.size());
  }
  w.finish();
  return out;
}

}  // namespace tmorph
