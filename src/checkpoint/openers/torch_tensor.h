// A torch.save tensor view as a CheckpointTensor, shared by every reader of torch.save files (plain files,
// sharded pytorch_model*.bin, DeepSpeed's model states).
#pragma once

#include <cstdint>
#include <memory>

#include "checkpoint/checkpoint.h"
#include "core/mapped_file.h"
#include "formats/torch_save.h"

namespace tmorph {

// The view t of f, whose file is Checkpoint::files[file_index] of file_size bytes. A contiguous view is
// read in place (its storage's bytes from its offset on); a strided view is gathered into a row-major
// copy when its values are first needed (Checkpoint::data), unless it expands its storage (stride 0)
// beyond the size of its file, which would make that copy larger than anything the file holds: then it
// is listed unreadable, as is a dtype without a kernel.
CheckpointTensor torch_checkpoint_tensor(const TorchSaveFile& f, const TorchTensorView& t, size_t file_index, uint64_t file_size);

// Adds one torch.save file's tensors (torch_checkpoint_tensor), metadata and header size to c.
void add_torch_file(Checkpoint& c, std::shared_ptr<MappedFile> file);

}  // namespace tmorph
