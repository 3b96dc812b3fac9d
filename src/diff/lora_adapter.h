// A PEFT LoRA adapter (a folder holding adapter_config.json and adapter_model.safetensors) seen as the change it
// makes to its base model: for each adapted module, ΔW = s · B · A with s = lora_alpha / r (lora_alpha / √r with
// use_rslora), B of shape [out, r] and A of shape [r, in]; the base weight is [out, in], or [in, out] with
// fan_in_fan_out (GPT-2's Conv1D), where ΔW is transposed. A and B are read whole (they are small); ΔW is never
// materialised: one row of it is computed when the difference pyramid reads that row of the base.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace tmorph {

class Planner;

// True when `path` is a folder holding adapter_config.json.
bool is_lora_adapter(const std::string& path);

struct LoraModule {
  std::string base_name;        // the base tensor it changes ("model.layers.0.self_attn.q_proj.weight")
  std::string a_name, b_name;   // its lora_A and lora_B tensors in adapter_model.safetensors
  uint64_t rows = 0, cols = 0;  // the base weight's shape, as ΔW is laid out
  // ΔW row by row: row i is s · Σ_k left[i·rank + k] · right[k·cols + c] (left = B, right = A; with
  // fan_in_fan_out left = Aᵀ, right = Bᵀ), float64 copies of the adapter's values.
  std::vector<double> left, right;
};

struct LoraAdapter {
  std::string folder, config_text;
  uint64_t rank = 0;
  double alpha = 0, scale = 0;
  bool rslora = false, fan_in_fan_out = false;
  std::vector<std::string> target_modules;
  std::shared_ptr<Checkpoint> weights;  // adapter_model.safetensors
  std::vector<LoraModule> modules;      // those whose A, B and base tensor were found with consistent shapes
  std::vector<std::pair<std::string, std::string>> skipped;  // (module or tensor, why)
  std::vector<std::string> unmatched;   // adapter tensors that are not a module's lora_A / lora_B
};

// Reads the adapter against `base`. Throws BadInput naming the file and field for a config that is not an adapter
// this reads (peft_type other than LORA, r or lora_alpha missing or not positive numbers, use_dora, a rank_pattern
// or alpha_pattern), Io when adapter_model.safetensors is missing.
LoraAdapter open_lora_adapter(const std::string& folder, const Checkpoint& base, const Planner& planner);

// s · ΔW's elements [c0, c1) of row `row` added to `values` (the base's values of that row).
void add_lora_row(const LoraAdapter& adapter, const LoraModule& m, uint64_t row, uint64_t c0, uint64_t c1, double* values);

}  // namespace tmorph
