// Which tensor of checkpoint A is compared with which tensor of checkpoint B.
//
// Names that are equal pair first. When exactly one of the two is a GGUF file, its names are then
// translated to Hugging Face names by llama.cpp's mapping for llama-family models (gguf-py's
// tensor_mapping.py; docs/diff.md lists it): blk.N.attn_q.weight <-> model.layers.N.self_attn.q_proj.weight
// and so on, and a name without the "model." prefix is tried as well (checkpoints saved from the inner model).
// A GGUF name the table does not know is left unmatched.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"

namespace tmorph {

// The Hugging Face name of a llama-family GGUF tensor name, or nullopt when the table has none.
std::optional<std::string> hf_name_of_gguf(const std::string& gguf_name);

// The role of a GGUF attention projection whose rows llama.cpp's converter permutes: "attn_q" or "attn_k" for
// blk.N.attn_q.weight / blk.N.attn_k.weight, else nullopt.
std::optional<std::string> permuted_projection(const std::string& gguf_name);

// The layer (block) number in a tensor name: the integer after "blk.", "layers.", "h." or "block." (the first
// such component), or nullopt for tensors outside the layers (embeddings, final norm, head).
std::optional<uint64_t> layer_of(const std::string& name);

struct TensorPair {
  size_t a = 0, b = 0;    // positions in A's and B's tensors
  bool translated = false;  // paired through the GGUF <-> Hugging Face mapping (not by equal names)
};

struct TensorMatching {
  std::string mapping;  // "exact names", or "llama.cpp GGUF names to Hugging Face names (A is GGUF)" / "(B is GGUF)"
  int gguf_side = 0;    // 0: neither or both are GGUF; 1: A is; 2: B is
  std::vector<TensorPair> pairs;  // in A's order
  std::vector<std::string> only_in_a, only_in_b;
};

TensorMatching match_tensors(const Checkpoint& a, const Checkpoint& b);

}  // namespace tmorph
