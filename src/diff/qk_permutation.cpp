#include "diff/qk_permutation.h"

#include <cstdlib>
#include <vector>

#include "checkpoint/value_reader.h"
#include "diff/diff_tile.h"
#include "ops/diff_tiles.h"

namespace tmorph {

uint64_t gguf_row_of_hf_row(uint64_t r, uint64_t rows, uint64_t heads) {
  const uint64_t d = rows / heads, half = d / 2;
  const uint64_t h = r / d, w = r % d, j = w / half, i = w % half;
  return h * d + 2 * i + j;
}

namespace {

std::optional<uint64_t> metadata_count(const Checkpoint& c, const std::string& key) {
  auto it = c.metadata.find(key);
  if (it == c.metadata.end() || it->second.empty()) return std::nullopt;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(it->second.c_str(), &end, 10);
  if (*end != '\0' || v == 0) return std::nullopt;
  return v;
}

}  // namespace

std::optional<uint64_t> permutation_heads(const Checkpoint& g, const CheckpointTensor& t, const std::string& role,
                                          std::string* why) {
  const auto arch = g.metadata.find("general.architecture");
  if (arch == g.metadata.end()) {
    *why = "the GGUF file has no general.architecture";
    return std::nullopt;
  }
  const std::string base = arch->second + ".attention.head_count";
  std::optional<uint64_t> heads = metadata_count(g, base);
  if (role == "attn_k")
    if (auto kv = metadata_count(g, base + "_kv")) heads = kv;
  if (!heads) {
    *why = "the GGUF file gives no single " + base + (role == "attn_k" ? "(_kv)" : "");
    return std::nullopt;
  }
  if (t.shape.size() != 2 || t.shape[0] % (2 * *heads) != 0) {
    *why = std::to_string(t.shape.empty() ? 0 : t.shape[0]) + " rows are not a multiple of 2 x " + std::to_string(*heads) + " heads";
    return std::nullopt;
  }
  return heads;
}

QkCheck detect_qk_permutation(const Checkpoint& g, const CheckpointTensor& tg, const Checkpoint& ch,
                              const CheckpointTensor& th, uint64_t heads, const Planner& planner) {
  QkCheck q;
  q.heads = heads;
  const View2D view = default_view(tg.shape);
  ValueReader rg(g, tg, planner, view), rh(ch, th, planner, view);
  q.sample_rows = view.rows / heads;
  std::vector<double> vh(view.cols), stored(view.cols), unpermuted(view.cols);
  const PlacedDiffTiles kernel(planner, 2 * q.sample_rows * view.cols);
  tm_diff_tile_v1 as_stored = tm_diff_tile_empty(), undone = tm_diff_tile_empty();  // each row one segment
  for (uint64_t r = 0; r < q.sample_rows; ++r) {
    rh.read(0, r, 0, view.cols, vh.data());
    rg.read(0, r, 0, view.cols, stored.data());
    rg.read(0, gguf_row_of_hf_row(r, view.rows, heads), 0, view.cols, unpermuted.data());
    kernel.add(vh.data(), stored.data(), 1, view.cols, view.cols, &as_stored);
    kernel.add(vh.data(), unpermuted.data(), 1, view.cols, view.cols, &undone);
  }
  q.sum_sq_as_stored = from_kernel_tile(as_stored).sum_sq_delta.value();
  q.sum_sq_unpermuted = from_kernel_tile(undone).sum_sq_delta.value();
  q.unpermute = q.sum_sq_unpermuted < q.sum_sq_as_stored;
  q.verdict = q.unpermute ? "permuted (undone)" : q.sum_sq_as_stored < q.sum_sq_unpermuted ? "not permuted" : "undecided (kept as stored)";
  return q;
}

}  // namespace tmorph
