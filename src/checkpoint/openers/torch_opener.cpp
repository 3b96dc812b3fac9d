// torch.save: one file (a zip archive, or the legacy pre-1.6 stream; the tar format of torch <= 0.3 is refused
// by name), or a folder holding pytorch_model*.bin.
// (Sharded pytorch_model.bin.index.json checkpoints open through safetensors_opener.cpp's index row.)
#include "checkpoint/openers/opener.h"
#include "checkpoint/openers/torch_tensor.h"
#include "formats/torch_save.h"

namespace tmorph {

void add_torch_file(Checkpoint& c, std::shared_ptr<MappedFile> file) {
  const TorchSaveFile f = parse_torch_save(file->data(), file->size(), file->path());
  c.format = "torch";
  for (const auto& [k, v] : f.metadata) c.metadata.emplace(k, v);
  for (const auto& t : f.tensors) c.tensors.push_back(torch_checkpoint_tensor(f, t, c.files.size(), file->size()));
  c.files.push_back(std::move(file));
  c.header_bytes.push_back(f.header_bytes);
}

namespace {

bool is_torch_file(const CheckpointProbe& p) {
  if (p.directory()) return false;
  const auto& f = p.file();
  // The tar format of torch <= 0.3 is claimed so that parse_torch_save refuses it by name.
  return looks_like_torch_zip(f->data(), f->size()) || looks_like_legacy_torch(f->data(), f->size()) ||
         looks_like_torch_tar(f->data(), f->size());
}

Checkpoint open_torch_file(const std::shared_ptr<MappedFile>& file) {
  Checkpoint c;
  add_torch_file(c, file);
  check_unique_names(c);
  return c;
}

Checkpoint open_torch_probe(const CheckpointProbe& p) { return open_torch_file(p.file()); }

bool is_torch_directory(const CheckpointProbe& p) {
  return p.directory() && p.listing().files.empty() && !p.listing().torch_files.empty();
}
Checkpoint open_torch_directory(const CheckpointProbe& p) {
  const auto& files = p.listing().torch_files;
  if (files.size() > 1)
    bad_checkpoint(p.path(), "holds " + std::to_string(files.size()) + " pytorch_model*.bin files but no pytorch_model.bin.index.json");
  return open_torch_file(std::make_shared<MappedFile>(files[0]));
}

}  // namespace

extern const CheckpointOpener kTorchFileOpener{"torch.save (zip or legacy)", is_torch_file, open_torch_probe};
extern const CheckpointOpener kTorchDirectoryOpener{"a folder with pytorch_model.bin", is_torch_directory, open_torch_directory};

}  // namespace tmorph
