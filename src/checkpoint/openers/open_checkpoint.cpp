#include "checkpoint/openers/open_checkpoint.h"

#include <string>

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
  // A 4D-STEM acquisition given to a checkpoint command: say which command opens it (the STEM openers decide the
  // rest; an HDF5 file's signature or a detector format's extension is enough to point there).
  static const char kHdf5Signature[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
  const std::string& p = probe.path();
  const auto ends_with = [&](const char* ext) {
    const size_t n = std::char_traits<char>::length(ext);
    return p.size() >= n && p.compare(p.size() - n, n, ext) == 0;
  };
  if (probe.starts_with(kHdf5Signature, sizeof kHdf5Signature) || ends_with(".mib") || ends_with(".blo") || ends_with(".xml"))
    bad_checkpoint(p, "not a checkpoint (an HDF5 file or a detector's frames); a 4D-STEM acquisition opens with "
                      "tensormorph stem inspect " + p + " (docs/stem.md), a raw tensor with --raw, --dtype and --shape");
  bad_checkpoint(p, "neither GGUF (magic 'GGUF'), safetensors (JSON header at byte 8), NumPy (.npy magic, or a zip of "
                    ".npy entries) nor torch.save (zip); for a raw tensor use --raw with --dtype and --shape");
}

}  // namespace

Checkpoint open_checkpoint_directory(const std::string& dir, bool follow_latest) { return open_probe(CheckpointProbe(dir, true, follow_latest)); }

Checkpoint open_checkpoint(const std::string& path) {
  const bool directory = path_kind(path) == PathKind::Directory;
  return open_probe(CheckpointProbe(path, directory));
}

}  // namespace tmorph
