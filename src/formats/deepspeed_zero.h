// DeepSpeed ZeRO checkpoint files (torch.save archives in a global_stepN/ folder), read for their
// structure as DeepSpeed's own zero_to_fp32 reads it, without DeepSpeed or torch:
//   *model_states.pt  {module: the model's state dict (stage 3: empty placeholders for partitioned
//                      parameters), param_shapes: per parameter group an OrderedDict name -> torch.Size
//                      in flattening order, shared_params: alias -> parameter, buffer_names, ...}
//   *optim_states.pt  {optimizer_state_dict: {zero_stage, partition_count, single_partition_of_fp32_groups
//                      (stages 1-2) or fp32_flat_groups (stage 3): this rank's flat fp32 partition per
//                      group, base_optimizer_state / optimizer_state_dict: the optimizer's state of those
//                      flat partitions (exp_avg, exp_avg_sq per group), loss_scaler, ...}, ds_config, ...}
// Only names are read: the loss scaler, the ZeroStageEnum and fragment_address objects DeepSpeed
// pickles are allowed as nodes (zero_allowed_globals), nothing is instantiated. Errors are
// tmorph::Error(BadInput) naming the file and the entry.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "formats/torch_save.h"

namespace tmorph {

// A parameter as param_shapes lists it.
struct ZeroParamShape {
  std::string name;
  std::vector<uint64_t> shape;
  uint64_t elements = 0;
};

struct ZeroModelStates {
  TorchSaveFile file;
  std::vector<std::vector<ZeroParamShape>> param_shapes;       // per parameter group, in flattening order
  std::vector<std::pair<std::string, std::string>> shared_params;  // alias -> the parameter it shares storage with
};

struct ZeroOptimStates {
  TorchSaveFile file;
  int stage = 0;              // 1, 2 or 3
  uint64_t world_size = 0;    // partition_count: how many data-parallel ranks the groups are split over
  std::vector<size_t> fp32_groups;                      // this rank's flat fp32 partition per group (into file.tensors)
  std::vector<std::map<std::string, size_t>> moments;  // per group: "exp_avg", "exp_avg_sq" -> into file.tensors
};

// The globals a ZeRO file may name beside torch.save's own; documented in docs/formats.md.
const std::vector<std::string>& zero_allowed_globals();
// Those globals as TorchSaveOptions (also used for Megatron's common.pt, with argparse.Namespace).
TorchSaveOptions zero_torch_save_options();

ZeroModelStates parse_zero_model_states(const uint8_t* bytes, uint64_t size, const std::string& path);
// bf16_optimizer: the file is DeepSpeed's BF16_Optimizer's (bf16_zero_pp_rank_*), which records no
// zero_stage: it partitions like stage 1.
ZeroOptimStates parse_zero_optim_states(const uint8_t* bytes, uint64_t size, const std::string& path, bool bf16_optimizer);

}  // namespace tmorph
