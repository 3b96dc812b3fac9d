#include "diff/name_matching.h"

#include <cctype>
#include <map>
#include <utility>

namespace tmorph {

namespace {

// llama.cpp's names (gguf-py tensor_mapping.py, MODEL_ARCH.LLAMA and the llama-family architectures that share
// them) and the Hugging Face transformers names they come from. Per-block entries omit "blk.N." / "model.layers.N.".
constexpr std::pair<const char*, const char*> kGlobal[] = {
    {"token_embd", "model.embed_tokens"},
    {"output_norm", "model.norm"},
    {"output", "lm_head"},
};
constexpr std::pair<const char*, const char*> kBlock[] = {
    {"attn_norm", "input_layernorm"},         {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},           {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"},      {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},      {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},            {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};

// "blk.12.attn_q.weight" -> {12, "attn_q", ".weight"}; nullopt for names of another form.
struct BlockName {
  std::string layer, role, suffix;
};
std::optional<BlockName> split_block_name(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return std::nullopt;
  size_t i = 4;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == 4 || i >= name.size() || name[i] != '.') return std::nullopt;
  const std::string rest = name.substr(i + 1);
  const size_t dot = rest.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  return BlockName{name.substr(4, i - 4), rest.substr(0, dot), rest.substr(dot)};
}

}  // namespace

std::optional<std::string> hf_name_of_gguf(const std::string& name) {
  if (auto blk = split_block_name(name)) {
    for (const auto& [g, h] : kBlock)
      if (blk->role == g) return "model.layers." + blk->layer + "." + h + blk->suffix;
    return std::nullopt;
  }
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::string role = name.substr(0, dot), suffix = name.substr(dot);
  for (const auto& [g, h] : kGlobal)
    if (role == g) return h + suffix;
  return std::nullopt;
}

std::optional<std::string> permuted_projection(const std::string& name) {
  const auto blk = split_block_name(name);
  if (!blk || blk->suffix != ".weight" || (blk->role != "attn_q" && blk->role != "attn_k")) return std::nullopt;
  return blk->role;
}

std::optional<uint64_t> layer_of(const std::string& name) {
  for (const char* key : {"blk.", "layers.", "h.", "block."}) {
    const std::string k = key;
    for (size_t at = name.find(k); at != std::string::npos; at = name.find(k, at + 1)) {
      if (at > 0 && name[at - 1] != '.') continue;  // a whole component: "layers.", not "sublayers."
      size_t i = at + k.size(), j = i;
      while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
      if (j > i && j - i < 10 && (j == name.size() || name[j] == '.')) return std::stoull(name.substr(i, j - i));
    }
  }
  return std::nullopt;
}

TensorMatching match_tensors(const Checkpoint& a, const Checkpoint& b) {
  TensorMatching m;
  const bool ga = a.format == "gguf", gb = b.format == "gguf";
  m.gguf_side = ga == gb ? 0 : (ga ? 1 : 2);
  m.mapping = m.gguf_side == 0 ? "exact names"
                               : std::string("llama.cpp GGUF names to Hugging Face names (") + (ga ? "A" : "B") + " is GGUF)";
  std::map<std::string, size_t> in_b;
  for (size_t i = 0; i < b.tensors.size(); ++i) in_b.emplace(b.tensors[i].name, i);
  std::vector<bool> b_used(b.tensors.size(), false), a_used(a.tensors.size(), false);
  std::vector<std::optional<TensorPair>> by_a(a.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i)
    if (auto it = in_b.find(a.tensors[i].name); it != in_b.end() && !b_used[it->second])
      by_a[i] = TensorPair{i, it->second, false}, b_used[it->second] = a_used[i] = true;
  if (m.gguf_side != 0) {
    // The non-GGUF side's names, looked up by their Hugging Face spelling (with and without "model.").
    const Checkpoint& hf = ga ? b : a;
    const std::vector<bool>& hf_used = ga ? b_used : a_used;
    std::map<std::string, size_t> by_hf;
    for (size_t i = 0; i < hf.tensors.size(); ++i)
      if (!hf_used[i]) {
        by_hf.emplace(hf.tensors[i].name, i);
        by_hf.emplace("model." + hf.tensors[i].name, i);
      }
    const Checkpoint& gg = ga ? a : b;
    for (size_t g = 0; g < gg.tensors.size(); ++g) {
      if ((ga ? a_used : b_used)[g]) continue;
      const auto hf_name = hf_name_of_gguf(gg.tensors[g].name);
      if (!hf_name) continue;
      auto it = by_hf.find(*hf_name);
      if (it == by_hf.end() || (ga ? b_used : a_used)[it->second]) continue;
      const size_t ia = ga ? g : it->second, ib = ga ? it->second : g;
      by_a[ia] = TensorPair{ia, ib, true}, a_used[ia] = b_used[ib] = true;
    }
  }
  for (size_t i = 0; i < a.tensors.size(); ++i)
    if (by_a[i]) m.pairs.push_back(*by_a[i]);
    else m.only_in_a.push_back(a.tensors[i].name);
  for (size_t i = 0; i < b.tensors.size(); ++i)
    if (!b_used[i]) m.only_in_b.push_back(b.tensors[i].name);
  return m;
}

}  // namespace tmorph
