// Opening a checkpoint, whatever its format: the path is offered to each row of the openers' table
// (checkpoint/openers/opener_table.cpp) in order, and the first row that recognises it opens it.
// Formats: one safetensors, GGUF, torch.save or NumPy (.npy, .npz) file, a sharded safetensors or torch.save
// checkpoint (a directory or its model.safetensors.index.json / pytorch_model.bin.index.json), a GGUF
// split set opened from any shard, a Distributed Checkpoint, Megatron torch_dist or DeepSpeed ZeRO folder.
#pragma once

#include <string>

#include "checkpoint/checkpoint.h"

namespace tmorph {

// Opens PATH: a directory, a *.safetensors.index.json or pytorch_model.bin.index.json, a
// NAME-0000i-of-0000N.gguf shard, or a single .safetensors / .gguf / torch.save (.pt, .pth, .bin) / .npy /
// .npz file (recognised by content). Every shard is checked; a missing or inconsistent shard is a BadInput
// error naming it; a file no row recognises is a BadInput error listing what was looked for.
Checkpoint open_checkpoint(const std::string& path);

// What decides which files make up the checkpoint at PATH, read without opening any of them: for a
// directory, the sorted names of its *.safetensors, *.safetensors.index.json, pytorch_model.bin.index.json
// and pytorch_model*.bin entries (and a DCP or ZeRO folder's files, a `latest` pointer's target); otherwise
// empty (the files are named by PATH itself or by a sidecar whose identity is checked separately).
std::string checkpoint_layout(const std::string& path);

}  // namespace tmorph
