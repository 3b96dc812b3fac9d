// ONNX models (a file named *.onnx, formats/onnx.h): the graph's initializers as tensors, read in place in the
// model file or in their external data files (each a file of the model's folder, mapped once however many tensors
// it holds), and the model's metadata. The model is file 0; external data files follow in the order first named.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "checkpoint/openers/opener.h"
#include "formats/onnx.h"

namespace tmorph {

namespace {

bool is_onnx_file(const CheckpointProbe& p) {
  if (p.directory()) return false;
  std::string name = std::filesystem::path(p.path()).filename().string();
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name_ends_with(name, ".onnx");
}

Checkpoint open_onnx_file(const CheckpointProbe& p) {
  const auto& file = p.file();
  const OnnxModel m = parse_onnx(file->data(), file->size(), p.path());
  Checkpoint c;
  c.format = "onnx";
  c.files.push_back(file);
  c.header_bytes.push_back(m.header_bytes);
  for (const auto& [k, v] : m.metadata) c.metadata.emplace(k, v);
  const std::filesystem::path folder = std::filesystem::path(p.path()).parent_path();
  std::map<std::string, size_t> data_files;  // location -> index into c.files
  for (const OnnxTensor& t : m.tensors) {
    CheckpointTensor ct;
    ct.name = t.name;
    ct.stored_type = t.stored_type;
    ct.dtype = t.dtype;
    ct.unavailable_reason = t.unavailable_reason;
    ct.shape = t.shape;
    ct.elements = t.elements;
    ct.bytes = t.bytes;
    ct.file_offset = t.offset;
    ct.file_index = 0;
    if (t.encoded) ct.storage = EncodedStorage{*t.encoded};  // in the model's bytes (file 0)
    if (t.external) {
      auto it = data_files.find(t.location);
      if (it == data_files.end()) {
        const std::string data_path = (folder / t.location).string();
        if (const auto why = missing_path(data_path))
          bad_checkpoint(p.path(), "tensor '" + t.name + "': its external data file " + data_path + " (location '" + t.location + "') is missing" + *why);
        c.files.push_back(std::make_shared<MappedFile>(data_path));
        c.header_bytes.push_back(std::min<uint64_t>(c.files.back()->size(), 4096));
        it = data_files.emplace(t.location, c.files.size() - 1).first;
      }
      ct.file_index = it->second;
      check_onnx_external_range(t, c.files[ct.file_index]->size(), p.path(), c.files[ct.file_index]->path());
    }
    c.tensors.push_back(std::move(ct));
  }
  return c;
}

}  // namespace

extern const CheckpointOpener kOnnxFileOpener{"ONNX model (*.onnx)", is_onnx_file, open_onnx_file};

}  // namespace tmorph
