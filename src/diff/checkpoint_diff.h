// `diff A B`: every matched tensor pair of two checkpoints measured element by element, with a difference
// pyramid (diff_pyramid.h) per pair built in one streamed pass that reads both, stored in the difference index
// (diff_store.h) and read back from it while both checkpoints are unchanged.
//
// A pair is compared when its shapes are equal and both tensors are floating (dense floats, or quantized and
// packed tensors, dequantized) or both integers; otherwise it is skipped with the reason. Values are read as
// float64: every dense dtype widened exactly (bf16, f16, fp8 included), ggml blocks and packed schemes as the
// float32 values they decode to. For a GGUF attn_q / attn_k paired with a Hugging Face projection, llama.cpp's
// row permutation is detected and undone (qk_permutation.h); the pyramid is then in Hugging Face row order.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "diff/diff_pyramid.h"
#include "diff/diff_store.h"
#include "diff/lora_adapter.h"
#include "diff/qk_permutation.h"
#include "tensormorph/placement.h"

namespace tmorph {

class Planner;

struct DiffOptions {
  std::vector<std::string> tensors;  // A's names to compare (default: every matched pair)
  std::string index_path;            // the difference index (default: the cache location)
  unsigned threads = 1;
  // Keep every pair's tiles in the result (PairDiff::pyramid.tiles); otherwise only each pair's summary is kept
  // and the tiles live in the difference index alone, so memory stays at one pair's pyramid however many pairs.
  bool keep_tiles = false;
  // Called with a pair's tensor positions in A and B (as opened from the paths given) before anything of the pair
  // is read (fetch = true) and after (false, also when reading failed): a face whose checkpoint lives on a server
  // fetches and releases those tensors' bytes there (app/remote_checkpoint.h). For an adapter over A, tensor_b is
  // kNoTensor (the adapter is read locally).
  std::function<void(size_t tensor_a, size_t tensor_b, bool fetch)> around_pair;
  static constexpr size_t kNoTensor = static_cast<size_t>(-1);
};

struct PairDiff {
  std::string name_a, name_b, type_a, type_b;
  std::vector<uint64_t> shape;
  bool translated = false;           // paired through the GGUF <-> Hugging Face name mapping
  std::optional<QkCheck> qk;         // a GGUF Q/K projection whose permutation was checked
  std::string qk_unchecked;          // ... or why it could not be checked
  std::optional<uint64_t> layer;
  DiffPyramid pyramid;               // its tiles only with DiffOptions::keep_tiles (layout and edges always)
  DiffTileStats summary;             // the whole pair (pyramid.summary())
  bool reused = false;               // read back from the difference index
  std::vector<Placement> placement;  // the dequantization placements of both sides (none for dense dtypes)
  double seconds = 0;                // this pair's pass (or its reading from the index)
};

struct Skipped {
  std::string name, reason;
};

struct AdapterSummary {
  uint64_t rank = 0;
  double alpha = 0, scale = 0;
  bool rslora = false, fan_in_fan_out = false;
  std::vector<std::string> target_modules;
};

struct CheckpointDiff {
  std::string a, b, format_a, format_b;
  std::optional<AdapterSummary> adapter;  // B is a PEFT LoRA adapter over A (lora_adapter.h)
  std::string mapping;               // how names were matched (name_matching.h)
  DiffStoreReport store;
  std::vector<PairDiff> pairs;       // in A's order
  std::vector<std::string> only_in_a, only_in_b;
  std::vector<Skipped> skipped;
};

// When B is a PEFT LoRA adapter folder (lora_adapter.h), each adapted base tensor of A is paired with A + ΔW: its
// pyramid is of ΔW = s · B · A, computed a row at a time in float64 (b = a + ΔW, Δ = b - a).
// Throws InvalidArgument when a name of options.tensors is in no matched pair.
CheckpointDiff diff_checkpoints(const std::string& a, const std::string& b, const Planner& planner, const DiffOptions& options);

// The values of one tile of a pair's difference: Δ = b - a, row-major over the tile's rows x columns (a level-0 tile
// is at most 65,536 elements; a coarser one covers more), read exactly as the pyramid reads them (the same pairing,
// Q/K rows and adapter ΔW). InvalidArgument when A's tensor `name` is in no comparable pair (with the reason), when
// the tile does not exist, or when it holds more than kMaxTileDeltaElements (ask a finer level).
constexpr uint64_t kMaxTileDeltaElements = uint64_t{1} << 24;
struct TileDelta {
  TileRange range;
  std::vector<double> delta;
};
// around_pair: as DiffOptions::around_pair, called around the one pair read (a face's remote fetch).
TileDelta diff_tile_values(const std::string& a, const std::string& b, const std::string& name, unsigned level, uint64_t slice,
                           uint64_t ty, uint64_t tx, const Planner& planner,
                           const std::function<void(size_t tensor_a, size_t tensor_b, bool fetch)>& around_pair = {});

}  // namespace tmorph
