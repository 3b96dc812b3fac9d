#include "diff/checkpoint_diff.h"

#include <algorithm>
#include <chrono>

#include "checkpoint/openers/open_checkpoint.h"
#include "checkpoint/value_reader.h"
#include "diff/name_matching.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return "[" + s + "]";
}

bool floating(const CheckpointTensor& t) {
  const auto d = t.summary_dtype();
  return d && dtype_is_float(*d);
}

// Whether a matched pair can be compared (the reason when not) and, for a GGUF Q/K projection paired through the
// name mapping, the permutation check and which side's rows are read un-permuted.
struct PairSetup {
  std::optional<std::string> skip;
  std::optional<QkCheck> qk;
  std::string qk_unchecked;
  int side = 0;  // 0: rows as stored; 1: A's rows un-permuted; 2: B's
};

PairSetup setup_pair(const Checkpoint& ca, const CheckpointTensor& ta, const Checkpoint& cb, const CheckpointTensor& tb,
                     bool translated, int gguf_side, const Planner& planner) {
  PairSetup s;
  if (ta.shape != tb.shape) {
    s.skip = "shape " + shape_text(ta.shape) + " in A against " + shape_text(tb.shape) + " in B (" + tb.name + ")";
    return s;
  }
  if (!ta.readable() || !tb.readable()) {
    const CheckpointTensor& t = ta.readable() ? tb : ta;
    s.skip = std::string(ta.readable() ? "B" : "A") + "'s " + t.name + " (" + t.stored_type + ") cannot be read: " +
             (t.unavailable_reason.empty() ? "no reader for its type" : t.unavailable_reason);
    return s;
  }
  if (floating(ta) != floating(tb)) {
    s.skip = "dtype " + ta.stored_type + " in A against " + tb.stored_type + " in B: a floating tensor is not compared with an integer one";
    return s;
  }
  if (!translated) return s;
  const bool a_gguf = gguf_side == 1;
  const CheckpointTensor& tg = a_gguf ? ta : tb;
  if (const auto role = permuted_projection(tg.name)) {
    std::string why;
    if (const auto heads = permutation_heads(a_gguf ? ca : cb, tg, *role, &why)) {
      s.qk = detect_qk_permutation(a_gguf ? ca : cb, tg, a_gguf ? cb : ca, a_gguf ? tb : ta, *heads, planner);
      if (s.qk->unpermute) s.side = a_gguf ? 1 : 2;
    } else {
      s.qk_unchecked = why;
    }
  }
  return s;
}

// Both sides of one pair read row by row through their value readers; the GGUF side's rows mapped back to
// Hugging Face order when its Q/K permutation is undone.
class PairReader final : public DiffPairReader {
 public:
  PairReader(const Checkpoint& ca, const CheckpointTensor& ta, const Checkpoint& cb, const CheckpointTensor& tb,
             const Planner& planner, const View2D& view, int unpermute_side, uint64_t heads)
      : ra_(ca, ta, planner, view), rb_(cb, tb, planner, view), side_(unpermute_side), heads_(heads), rows_(view.rows) {}
  void read(uint64_t slice, uint64_t row, uint64_t c0, uint64_t c1, double* a, double* b) override {
    const uint64_t mapped = side_ ? gguf_row_of_hf_row(row, rows_, heads_) : row;
    ra_.read(slice, side_ == 1 ? mapped : row, c0, c1, a);
    rb_.read(slice, side_ == 2 ? mapped : row, c0, c1, b);
  }
  std::vector<Placement> placement() const {
    std::vector<Placement> p = ra_.placement();
    p.insert(p.end(), rb_.placement().begin(), rb_.placement().end());
    return p;
  }

 private:
  ValueReader ra_, rb_;
  int side_;  // 0: no rows mapped; 1: A's; 2: B's
  uint64_t heads_, rows_;
};

// A base tensor and the same tensor with an adapter's ΔW added, row by row.
class AdapterPairReader final : public DiffPairReader {
 public:
  AdapterPairReader(const Checkpoint& c, const CheckpointTensor& t, const Planner& planner, const View2D& view,
                    const LoraAdapter& ad, const LoraModule& m)
      : r_(c, t, planner, view), ad_(ad), m_(m) {}
  void read(uint64_t slice, uint64_t row, uint64_t c0, uint64_t c1, double* a, double* b) override {
    r_.read(slice, row, c0, c1, a);
    std::copy(a, a + (c1 - c0), b);
    add_lora_row(ad_, m_, row, c0, c1, b);
  }
  const std::vector<Placement>& placement() const { return r_.placement(); }

 private:
  ValueReader r_;
  const LoraAdapter& ad_;
  const LoraModule& m_;
};

// A pair's bytes fetched while it is read (DiffOptions::around_pair), released when it goes out of scope.
class PairFetch {
 public:
  PairFetch(const std::function<void(size_t, size_t, bool)>& around, size_t a, size_t b) : around_(around), a_(a), b_(b) {
    if (around_) around_(a_, b_, true);
  }
  ~PairFetch() {
    if (!around_) return;
    try {
      around_(a_, b_, false);
    } catch (...) {  // releasing is best effort; the pair's result (or its error) stands
    }
  }
  PairFetch(const PairFetch&) = delete;
  PairFetch& operator=(const PairFetch&) = delete;

 private:
  const std::function<void(size_t, size_t, bool)>& around_;
  size_t a_, b_;
};

CheckpointDiff diff_adapter(const std::string& a, const std::string& b, const Planner& planner, const DiffOptions& options) {
  const Checkpoint ca = open_checkpoint(a);
  const LoraAdapter ad = open_lora_adapter(b, ca, planner);
  CheckpointDiff out;
  out.a = a, out.b = b, out.format_a = ca.format, out.format_b = "peft-lora";
  out.mapping = "PEFT LoRA module names (base_model.model.NAME.lora_A/lora_B) to base tensors NAME.weight";
  out.adapter = AdapterSummary{ad.rank, ad.alpha, ad.scale, ad.rslora, ad.fan_in_fan_out, ad.target_modules};
  for (const auto& [module, why] : ad.skipped) out.skipped.push_back({module, why});
  out.only_in_b = ad.unmatched;
  for (const auto& name : options.tensors)
    if (std::none_of(ad.modules.begin(), ad.modules.end(), [&](const LoraModule& m) { return m.base_name == name; }))
      throw Error(ErrorKind::InvalidArgument, "tensor '" + name + "' of " + a + " is not changed by the adapter " + b);
  DiffStore store(options.index_path, a, b, checkpoints_identity(ca, *ad.weights) + ad.config_text);
  out.store = store.report();
  for (const LoraModule& m : ad.modules) {
    if (!options.tensors.empty() && std::find(options.tensors.begin(), options.tensors.end(), m.base_name) == options.tensors.end())
      continue;
    const size_t position = ca.position(m.base_name, a);
    const CheckpointTensor& t = ca.tensors[position];
    PairFetch fetched(options.around_pair, position, DiffOptions::kNoTensor);
    if (!floating(t)) {
      out.skipped.push_back({m.base_name, "dtype " + t.stored_type + ": an adapter changes floating weights only"});
      continue;
    }
    PairDiff d;
    d.name_a = t.name, d.name_b = m.b_name + " · " + m.a_name, d.type_a = t.stored_type;
    d.type_b = "LoRA r=" + std::to_string(ad.rank), d.shape = t.shape, d.layer = layer_of(t.name);
    const View2D view = default_view(t.shape);
    const auto t0 = std::chrono::steady_clock::now();
    d.placement = AdapterPairReader(ca, t, planner, view, ad, m).placement();
    const PlacedDiffTiles kernel(planner, view.slices * view.rows * view.cols);
    d.placement.push_back(kernel.placement());
    if (auto stored = store.load(t.name, d.name_b, "adapter", view)) {
      d.pyramid = std::move(*stored);
      d.reused = true;
    } else {
      const auto make = [&]() -> std::unique_ptr<DiffPairReader> {
        return std::make_unique<AdapterPairReader>(ca, t, planner, view, ad, m);
      };
      d.pyramid = build_diff_pyramid(view, make, kernel, options.threads);
      store.store(t.name, d.name_b, "adapter", d.pyramid);
    }
    d.summary = d.pyramid.summary();
    if (!options.keep_tiles) d.pyramid.tiles = {};
    d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.pairs.push_back(std::move(d));
  }
  return out;
}

}  // namespace

CheckpointDiff diff_checkpoints(const std::string& a, const std::string& b, const Planner& planner, const DiffOptions& options) {
  if (is_lora_adapter(b)) return diff_adapter(a, b, planner, options);
  const Checkpoint ca = open_checkpoint(a), cb = open_checkpoint(b);
  const TensorMatching m = match_tensors(ca, cb);
  CheckpointDiff out;
  out.a = a, out.b = b, out.format_a = ca.format, out.format_b = cb.format, out.mapping = m.mapping;
  out.only_in_a = m.only_in_a, out.only_in_b = m.only_in_b;
  for (const auto& name : options.tensors)
    if (std::none_of(m.pairs.begin(), m.pairs.end(), [&](const TensorPair& p) { return ca.tensors[p.a].name == name; }))
      throw Error(ErrorKind::InvalidArgument, "tensor '" + name + "' of " + a + " has no counterpart in " + b);
  DiffStore store(options.index_path, a, b, checkpoints_identity(ca, cb));
  out.store = store.report();
  for (const TensorPair& p : m.pairs) {
    const CheckpointTensor& ta = ca.tensors[p.a];
    const CheckpointTensor& tb = cb.tensors[p.b];
    if (!options.tensors.empty() && std::find(options.tensors.begin(), options.tensors.end(), ta.name) == options.tensors.end())
      continue;
    PairFetch fetched(options.around_pair, p.a, p.b);
    PairSetup setup = setup_pair(ca, ta, cb, tb, p.translated, m.gguf_side, planner);
    if (setup.skip) {
      out.skipped.push_back({ta.name, *setup.skip});
      continue;
    }
    PairDiff d;
    d.name_a = ta.name, d.name_b = tb.name, d.type_a = ta.stored_type, d.type_b = tb.stored_type, d.shape = ta.shape;
    d.translated = p.translated;
    d.layer = layer_of(ta.name);
    if (!d.layer) d.layer = layer_of(tb.name);
    d.qk = setup.qk, d.qk_unchecked = setup.qk_unchecked;
    const int side = setup.side;
    const View2D view = default_view(ta.shape);
    const std::string rows = side ? "unpermuted" : "stored";
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t heads = d.qk ? d.qk->heads : 0;
    d.placement = PairReader(ca, ta, cb, tb, planner, view, side, heads).placement();
    const PlacedDiffTiles kernel(planner, view.slices * view.rows * view.cols);
    d.placement.push_back(kernel.placement());
    if (auto stored = store.load(ta.name, tb.name, rows, view)) {
      d.pyramid = std::move(*stored);
      d.reused = true;
    } else {
      const auto make = [&]() -> std::unique_ptr<DiffPairReader> {
        return std::make_unique<PairReader>(ca, ta, cb, tb, planner, view, side, heads);
      };
      d.pyramid = build_diff_pyramid(view, make, kernel, options.threads);
      store.store(ta.name, tb.name, rows, d.pyramid);
    }
    d.summary = d.pyramid.summary();
    if (!options.keep_tiles) d.pyramid.tiles = {};
    d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.pairs.push_back(std::move(d));
  }
  return out;
}

namespace {

TileDelta read_tile(DiffPairReader& reader, const std::vector<uint64_t>& shape, const std::string& name, unsigned level,
                    uint64_t slice, uint64_t ty, uint64_t tx) {
  const PyramidLayout l = make_pyramid_layout(default_view(shape));
  if (level >= l.levels.size() || slice >= l.view.slices || ty >= l.levels[level].rows || tx >= l.levels[level].cols)
    throw Error(ErrorKind::InvalidArgument, name + ": no tile (" + std::to_string(tx) + ", " + std::to_string(ty) + ") of slice " +
                                                std::to_string(slice) + " at level " + std::to_string(level) + " (levels 0 to " +
                                                std::to_string(l.levels.size() - 1) + ", " + std::to_string(l.view.slices) +
                                                " slice(s))");
  TileDelta out;
  out.range = l.range(level, ty, tx);
  const uint64_t rows = out.range.row_end - out.range.row_begin, cols = out.range.col_end - out.range.col_begin;
  if (rows * cols > kMaxTileDeltaElements)
    throw Error(ErrorKind::InvalidArgument, name + ": tile (" + std::to_string(tx) + ", " + std::to_string(ty) + ") of level " +
                                                std::to_string(level) + " holds " + std::to_string(rows * cols) +
                                                " elements, more than the " + std::to_string(kMaxTileDeltaElements) +
                                                " returned at once: ask a finer level");
  out.delta.resize(rows * cols);
  std::vector<double> va(cols), vb(cols);
  for (uint64_t r = 0; r < rows; ++r) {
    reader.read(slice, out.range.row_begin + r, out.range.col_begin, out.range.col_end, va.data(), vb.data());
    for (uint64_t c = 0; c < cols; ++c) out.delta[r * cols + c] = vb[c] - va[c];
  }
  return out;
}

}  // namespace

TileDelta diff_tile_values(const std::string& a, const std::string& b, const std::string& name, unsigned level, uint64_t slice,
                           uint64_t ty, uint64_t tx, const Planner& planner,
                           const std::function<void(size_t tensor_a, size_t tensor_b, bool fetch)>& around_pair) {
  if (is_lora_adapter(b)) {
    const Checkpoint ca = open_checkpoint(a);
    const LoraAdapter ad = open_lora_adapter(b, ca, planner);
    for (const LoraModule& m : ad.modules) {
      if (m.base_name != name) continue;
      const CheckpointTensor& t = ca.tensors[ca.position(name, a)];
      if (!floating(t)) throw Error(ErrorKind::InvalidArgument, name + ": dtype " + t.stored_type + ": an adapter changes floating weights only");
      PairFetch fetched(around_pair, ca.position(name, a), DiffOptions::kNoTensor);
      AdapterPairReader reader(ca, t, planner, default_view(t.shape), ad, m);
      return read_tile(reader, t.shape, name, level, slice, ty, tx);
    }
    throw Error(ErrorKind::InvalidArgument, "tensor '" + name + "' of " + a + " is not changed by the adapter " + b);
  }
  const Checkpoint ca = open_checkpoint(a), cb = open_checkpoint(b);
  const TensorMatching m = match_tensors(ca, cb);
  for (const TensorPair& p : m.pairs) {
    const CheckpointTensor& ta = ca.tensors[p.a];
    if (ta.name != name) continue;
    const CheckpointTensor& tb = cb.tensors[p.b];
    const PairSetup setup = setup_pair(ca, ta, cb, tb, p.translated, m.gguf_side, planner);
    if (setup.skip) throw Error(ErrorKind::InvalidArgument, name + ": not compared: " + *setup.skip);
    PairFetch fetched(around_pair, p.a, p.b);
    PairReader reader(ca, ta, cb, tb, planner, default_view(ta.shape), setup.side, setup.qk ? setup.qk->heads : 0);
    return read_tile(reader, ta.shape, name, level, slice, ty, tx);
  }
  throw Error(ErrorKind::InvalidArgument, "tensor '" + name + "' of " + a + " has no counterpart in " + b);
}

}  // namespace tmorph
