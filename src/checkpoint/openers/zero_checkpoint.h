// A DeepSpeed ZeRO checkpoint folder (global_stepN/, formats/deepspeed_zero.h) as a Checkpoint: the model
// states' weights under their names (bf16/fp16, as the module holds them; stage 3's empty placeholders
// left out), and per parameter its fp32 master weight and optimizer moments reassembled from the ranks'
// flat partitions as DeepSpeed's zero_to_fp32 does, named optimizer.state.fp32_param.NAME and
// optimizer.state.{exp_avg,exp_avg_sq,...}.NAME (Megatron's names for the same). Each is a chunked
// tensor of flat ranges (TensorChunk) read in place from the optimizer-states files: nothing is copied
// until a reader needs a whole tensor (Checkpoint::data).
#pragma once

#include <string>

#include "checkpoint/checkpoint.h"

namespace tmorph {

// True when dir holds a *model_states.pt and a *optim_states.pt file.
bool is_zero_directory(const std::string& dir);

// The names of those files, one per line.
std::string zero_layout(const std::string& dir);

// Opens the ZeRO checkpoint in dir (data-parallel ranks of one model-parallel rank, mp_rank_00).
// Unparseable files and model-parallel checkpoints are BadInput errors naming the file; when the
// optimizer-states files are incomplete (a rank missing) or their partitions do not hold the parameters
// param_shapes lists, the master weights and moments are listed unreadable with the reason and the
// model weights stay readable.
Checkpoint open_zero(const std::string& dir);

}  // namespace tmorph
