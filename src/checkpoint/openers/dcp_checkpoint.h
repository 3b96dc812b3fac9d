// A Distributed Checkpoint directory (formats/dcp.h) as a Checkpoint: one logical tensor per
// state-dict entry, assembled from its chunks across the .distcp files (TensorChunk), non-tensor
// entries as metadata.
#pragma once

#include <string>

#include "checkpoint/checkpoint.h"

namespace tmorph {

// True when dir holds a DCP .metadata file.
bool is_dcp_directory(const std::string& dir);

// The names of what makes up the DCP checkpoint in dir (.metadata and its *.distcp files), one per line.
std::string dcp_layout(const std::string& dir);

// Opens the DCP checkpoint in dir. The metadata must parse (else BadInput naming .metadata and the
// byte offset); a tensor whose chunks cannot be read (a missing file, a chunk past its file's end, a
// chunk that is not the torch.save archive of a tensor of its size and dtype) or do not tile it exactly
// (outside the tensor, overlapping, elements missing) is listed unreadable with the reason.
Checkpoint open_dcp(const std::string& dir);

}  // namespace tmorph
