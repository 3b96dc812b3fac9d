#include "checkpoint/openers/open_checkpoint.h"

#include "checkpoint/openers/opener.h"
#include "core/path_kind.h"

namespace tmorph {

namespace {

// Offers the probe to each row that takes its kind (file or directory); the first that recognises it opens it.
Checkpoint open_probe(const CheckpointProbe& probe) {
  for (const CheckpointOpener* row : checkpoint_openers()) {
    if (row->recognises(probe)) return row->open(probe);
  }
  if (probe.directory())
    bad_checkpoint(probe.path(), "holds no *.safetensors file, no *.safetensors.index.json, no pytorch_model.bin, no DCP .metadata, "
                                 "no DeepSpeed *_model_states.pt + *_optim_states.pt and no latest pointer");
  bad_checkpoint(probe.path(), "neither GGUF (magic 'GGUF'), safetensors (JSON header at byte 8), NumPy (.npy magic, or a zip of "
                               ".npy entries) nor torch.save (zip); for a raw tensor use --raw with --dtype and --shape");
}

}  // namespace

Checkpoint open_checkpoint_directory(const std::string& dir, bool follow_latest) { return open_probe(CheckpointProbe(dir, true, follow_latest)); }

Checkpoint open_checkpoint(const std::string& path) {
  const bool directory = path_kind(path) == PathKind::Directory;
  return open_probe(CheckpointProbe(path, directory));
}

}  // namespace tmorph
