#include "checkpoint/checkpoint.h"

#include <cstring>

#include "formats/gguf.h"
#include "formats/safetensors.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

Checkpoint from_safetensors(std::shared_ptr<MappedFile> file) {
  const SafetensorsHeader h = parse_safetensors(file->data(), file->size(), file->path());
  Checkpoint c;
  c.format = "safetensors";
  c.metadata = h.metadata;
  for (const auto& t : h.tensors) {
    CheckpointTensor ct;
    ct.name = t.name;
    ct.stored_type = t.dtype_name;
    ct.dtype = t.dtype;
    if (!t.dtype) ct.unavailable_reason = "no kernel yet for safetensors dtype " + t.dtype_name;
    ct.shape = t.shape;
    ct.elements = t.elements;
    ct.bytes = t.end - t.begin;
    ct.file_offset = t.file_offset;
    c.tensors.push_back(std::move(ct));
  }
  c.files.push_back(std::move(file));
  return c;
}

Checkpoint from_gguf(std::shared_ptr<MappedFile> file) {
  const GgufFile g = parse_gguf(file->data(), file->size(), file->path());
  Checkpoint c;
  c.format = "gguf";
  for (const auto& kv : g.kvs)
    if (kv.type != GgufType::ARRAY) c.metadata[kv.key] = kv.value.is_string() ? kv.value.get<std::string>() : kv.value.dump();
  for (const auto& t : g.tensors) {
    CheckpointTensor ct;
    ct.name = t.name;
    ct.stored_type = t.type->name;
    ct.dtype = t.type->dense;
    if (!ct.dtype) ct.unavailable_reason = std::string("quantized type ") + t.type->name + ": dequantization comes with the quantized-models issue";
    ct.shape = t.shape;
    ct.ne = t.ne;
    ct.elements = t.elements;
    ct.bytes = t.bytes;
    ct.file_offset = t.data_offset;
    c.tensors.push_back(std::move(ct));
  }
  c.files.push_back(std::move(file));
  return c;
}

}  // namespace

Checkpoint open_checkpoint(const std::string& path) {
  auto file = std::make_shared<MappedFile>(path);
  if (file->size() >= 4 && std::memcmp(file->data(), "GGUF", 4) == 0) return from_gguf(std::move(file));
  if (file->size() >= 9 && file->data()[8] == '{') return from_safetensors(std::move(file));
  throw Error(ErrorKind::BadInput, path + ": neither GGUF (magic 'GGUF') nor safetensors (JSON header at byte 8); "
                                          "for a raw tensor use --raw with --dtype and --shape");
}

}  // namespace tmorph
