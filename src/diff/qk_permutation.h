// llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel.permute) stores the rows of llama-family Q and K
// projections in another order than Hugging Face does, for its rotary layout: with H heads (the KV heads for
// K) of D rows each, HF row h·D + j·D/2 + i (j in {0, 1}, i < D/2) is stored as GGUF row h·D + 2·i + j, i.e.
// w.reshape(H, 2, D/2, cols).swapaxes(1, 2).reshape(rows, cols). Undoing it is a map of row numbers.
//
// Whether a given GGUF file has it (llama.cpp's converter applies it for llama-family architectures; other
// writers may not) is detected from the data: the first head's rows are compared with the other checkpoint's
// as stored and un-permuted, and the order with the smaller Σ Δ² is taken; equal sums (identical rows, or
// rows that the permutation maps onto equal rows) keep the stored order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "checkpoint/checkpoint.h"

namespace tmorph {

class Planner;

// The GGUF row that holds Hugging Face row `hf_row` of a projection of `heads` heads (rows divisible by 2 · heads).
uint64_t gguf_row_of_hf_row(uint64_t hf_row, uint64_t rows, uint64_t heads);

// The head count llama.cpp permuted a GGUF tensor with: {general.architecture}.attention.head_count for
// attn_q, .head_count_kv (else head_count) for attn_k. nullopt, with *why set, when the file does not say or
// the rows are not a multiple of 2 · heads.
std::optional<uint64_t> permutation_heads(const Checkpoint& gguf, const CheckpointTensor& t, const std::string& role,
                                          std::string* why);

struct QkCheck {
  uint64_t heads = 0;
  uint64_t sample_rows = 0;           // the rows compared (the first head's), each whole
  double sum_sq_as_stored = 0;        // Σ Δ² of those rows with the GGUF rows as stored
  double sum_sq_unpermuted = 0;       // ... and with llama.cpp's permutation undone
  bool unpermute = false;             // the pyramid reads the GGUF rows un-permuted
  std::string verdict;                // "permuted (undone)", "not permuted", "undecided (kept as stored)"
};

// Compares the first head's rows of the GGUF tensor (checkpoint g, tensor tg) with the other side's (ch, th)
// both ways. Shapes must be equal 2-D.
QkCheck detect_qk_permutation(const Checkpoint& g, const CheckpointTensor& tg, const Checkpoint& ch,
                              const CheckpointTensor& th, uint64_t heads, const Planner& planner);

}  // namespace tmorph
