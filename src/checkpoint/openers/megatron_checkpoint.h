// A Megatron-LM `torch_dist` checkpoint folder (iter_NNNNNNN/): a Distributed Checkpoint (.metadata and
// *.distcp, read by dcp_checkpoint.h) whose entries are Megatron's sharded state-dict keys, beside
// metadata.json ({"sharded_backend": "torch_dist", ...}) and common.pt, a torch.save of the state every
// rank shares (args, iteration, checkpoint_version). Tensors are listed under Megatron's keys
// (model weights, optimizer.state.{fp32_param,exp_avg,exp_avg_sq}.*); replicated entries were written
// once by DCP and read as such; common.pt's scalars and args become metadata.
#pragma once

#include <string>

#include "checkpoint/checkpoint.h"

namespace tmorph {

// True when dir holds metadata.json naming sharded_backend torch_dist, and a DCP .metadata.
bool is_megatron_directory(const std::string& dir);

// Opens it (open_dcp, then metadata.json and common.pt). A common.pt that cannot be read is reported as
// the metadata entry megatron.common and does not stop the tensors from being read.
Checkpoint open_megatron(const std::string& dir);

}  // namespace tmorph
