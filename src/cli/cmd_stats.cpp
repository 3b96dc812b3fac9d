// tensormorph stats: exact statistics of a raw tensor file.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include "app/checkpoint_json.h"
#include "app/remote_checkpoint.h"
#include "app/result_json.h"
#include "app/stats_document.h"
#include "cli/commands.h"
#include "cli/index_access.h"
#include "cli/output.h"
#include "cli/compute_flags.h"
#include "cli/ranks.h"
#include "core/format.h"
#include "checkpoint/openers/open_checkpoint.h"
#include "formats/raw_tensor.h"
#include "tensormorph/error.h"
#include "tensormorph/stats.h"

namespace tmorph::cli {

namespace {

struct StatsArgs {
  std::string path;
  std::vector<std::string> tensors;
  std::string raw;
  std::string index_path;
  std::string dtype;
  std::optional<std::string> shape;  // given (even empty) or not
  uint64_t offset = 0;
  uint32_t bins = 256;
  std::vector<double> hist_range;
  std::vector<double> hist_edges;
  std::vector<double> quantiles;
  bool no_histogram = false;
  bool no_quantiles = false;
  bool quantization = false;
  bool json = false;
  ComputeFlags compute;
};

// The --raw document: the file's tensor and its statistics (app/result_json.h).
nlohmann::json raw_stats_json(const RawTensor& t, const StatsResult& r, const std::string& path) {
  return {{"file", path},
          {"dtype", dtype_name(t.dtype)},
          {"shape", t.shape},
          {"offset", t.offset},
          {"elements", t.elements},
          {"bytes", t.elements * dtype_size(t.dtype)},
          {"stats", app::stats_json(r)},
          {"placement", placements_json(r.placement)}};
}

// 32-character bar chart of the histogram, one character per 8 bins.
std::string sparkline(const Histogram& h) {
  static const char* levels[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  const size_t cols = std::min<size_t>(32, h.counts.size());
  std::vector<uint64_t> col(cols, 0);
  for (size_t i = 0; i < h.counts.size(); ++i) col[i * cols / h.counts.size()] += h.counts[i];
  uint64_t peak = 1;
  for (auto c : col) peak = std::max(peak, c);
  std::string out;
  for (auto c : col) out += levels[c == 0 ? 0 : 1 + (c * 7) / peak];
  return out;
}

void print_quantization(const QuantizationStats& q) {
  std::vector<std::pair<std::string, std::string>> rows = {{"bits per weight", fmt(q.bits_per_weight)}};
  auto scale_row = [&](const char* what, const std::optional<StatsResult>& r) {
    if (!r) return;
    std::string v = "min " + fmt(r->moments.min) + "  max " + fmt(r->moments.max) + "  mean " + fmt(r->moments.mean);
    if (r->quantiles.size() >= 3) v += "  median " + fmt(r->quantiles[2].value);
    rows.emplace_back(what, v);
  };
  scale_row("block scales", q.scales);
  scale_row("block mins", q.mins);
  if (q.code_bits) {
    uint64_t used = 0;
    for (auto c : q.code_counts) used += c != 0;
    rows.emplace_back("codes used", std::to_string(used) + " of " + std::to_string(q.code_counts.size()));
    rows.emplace_back("saturated codes", fmt(q.codes ? 100.0 * static_cast<double>(q.saturated) / static_cast<double>(q.codes) : 0) + "%");
  }
  std::printf("quantization:\n");
  print_rows(rows);
}

// One tensor in detail: a title line (what and where), every statistic, the histogram, the placement.
void print_stats(const std::string& title, const StatsResult& r) {
  const auto& m = r.moments;
  std::printf("%s\n", title.c_str());
  std::vector<std::pair<std::string, std::string>> rows = {
      {"count", std::to_string(m.count)},
      {"finite", std::to_string(m.finite_count)},
      {"nan", std::to_string(m.nan_count)},
      {"inf", std::to_string(m.inf_count)},
      {"zero", std::to_string(m.zero_count)},
      {"min", m.is_integer ? m.int_min : fmt(m.min)},
      {"max", m.is_integer ? m.int_max : fmt(m.max)},
      {"abs_max", fmt(m.abs_max)},
      {"sum", m.is_integer ? m.int_sum : fmt(m.sum)},
      {"mean", fmt(m.mean)},
      {"std (population)", fmt(m.std)}};
  for (const auto& q : r.quantiles) {
    char name[32];
    std::snprintf(name, sizeof name, "p%g", q.p * 100);
    std::string v = fmt(q.value);
    if (!r.quantiles_exact) v += "  in [" + fmt(q.lo) + ", " + fmt(q.hi) + "] (" + r.quantile_method + ")";
    rows.emplace_back(name, v);
  }
  if (r.histogram) {
    const auto& h = *r.histogram;
    rows.emplace_back("histogram", std::to_string(h.counts.size()) + " bins over [" + fmt(h.edges.front()) + ", " +
                                       fmt(h.edges.back()) + "]  " + sparkline(h));
    if (h.below || h.above)
      rows.emplace_back("outside range", std::to_string(h.below) + " below, " + std::to_string(h.above) + " above");
  }
  print_rows(rows);
  print_placements(r.placement);
}

// The statistics options the flags ask for, within the runtime's threads and memory budget.
StatsOptions options_from(const StatsArgs& a, const Runtime& rt) {
  StatsOptions opt;
  opt.threads = rt.threads;
  opt.memory_budget_bytes = rt.memory_budget;
  opt.allowed_approx_steps = {a.compute.allow_approx.begin(), a.compute.allow_approx.end()};
  opt.histogram = !a.no_histogram;
  opt.bins = a.bins;
  if (!a.hist_range.empty()) {
    if (a.hist_range.size() != 2) throw Error(ErrorKind::InvalidArgument, "--hist-range: expected LO,HI");
    opt.histogram_range = std::make_pair(a.hist_range[0], a.hist_range[1]);
  }
  if (!a.hist_edges.empty() && (!a.hist_range.empty()))
    throw Error(ErrorKind::InvalidArgument, "--hist-edges and --hist-range exclude each other");
  opt.histogram_edges = a.hist_edges;
  opt.quantiles = !a.no_quantiles;
  if (!a.quantiles.empty()) opt.probabilities = a.quantiles;
  for (double p : opt.probabilities)
    if (!(p >= 0 && p <= 1)) throw Error(ErrorKind::InvalidArgument, "--quantiles: " + fmt(p) + " is outside [0, 1]");
  return opt;
}

// True when the flags ask for exactly what the index stores (its options, any placement): then the
// statistics come from the index, computed once and kept.
bool index_serves(const StatsArgs& a) {
  const StatsOptions d = CheckpointIndex::index_options();
  return a.bins == d.bins && a.hist_range.empty() && a.hist_edges.empty() && a.quantiles.empty() && !a.no_histogram &&
         !a.no_quantiles && a.compute.backend.empty() && a.compute.prefer.empty() && a.compute.never.empty() &&
         a.compute.allow_approx.empty();
}

// Statistics of the tensors of a checkpoint (all, or the ones named), built by the application's statistics document:
// from its index when the flags ask for the indexed statistics (computing and storing what it lacks), else computed
// for this request. Rows print as they are ready.
void run_checkpoint_stats(const StatsArgs& a, const Runtime& rt) {
  // http(s):// or hf://: headers fetched into local stand-ins; a tensor's bytes are fetched before it is computed
  // and released after.
  const auto remote = app::open_remote_if_url(a.path);
  app::StatsDocumentRequest req;
  req.path = remote ? remote->local_path() : a.path;
  req.tensors = a.tensors;
  req.from_index = index_serves(a);
  req.options = options_from(a, rt);
  req.quantization = a.quantization;
  req.open_index = [&] { return open_index(req.path, a.index_path); };
  req.fill_index = [&](CheckpointIndex& index, const std::vector<size_t>& selected) {
    std::vector<size_t> readable;
    if (remote) {
      for (size_t i : selected)
        if (index.checkpoint().tensors[i].readable()) readable.push_back(i);
      remote->fetch(index.checkpoint(), readable);
    }
    fill_index(index, rt, selected, a.json);
    if (remote) remote->release(index.checkpoint(), readable);
    return true;
  };
  // Statistics computed for this request only (flags the index does not store), or a quantization report (read
  // from the blocks): the named tensors' bytes first.
  std::optional<Checkpoint> fetched_from;
  std::vector<size_t> fetched;
  if (remote && (!req.from_index || a.quantization)) {
    fetched_from = open_checkpoint(req.path);
    for (size_t i = 0; i < fetched_from->tensors.size(); ++i) {
      const auto& t = fetched_from->tensors[i];
      const bool named = a.tensors.empty() || std::find(a.tensors.begin(), a.tensors.end(), t.name) != a.tensors.end();
      if (named && t.readable()) fetched.push_back(i);
    }
    remote->fetch(*fetched_from, fetched);
  }
  if (!req.from_index && leads_ranks())
    std::fprintf(stderr, "tensormorph: warning: statistics with these flags are not the indexed ones: rank 0 computes them "
                         "alone (only indexing is shared across MPI ranks)\n");
  size_t shown = 0;  // rows to print: one is shown in detail, several as a table
  req.on_start = [&](const Checkpoint& c, size_t rows) {
    shown = rows;
    if (!a.json && rows > 1)
      std::printf("%s  %s, %zu tensors\n%-48s %-8s %-20s %12s %6s %6s %12s %12s %12s %12s\n", a.path.c_str(), c.format.c_str(),
                  c.tensors.size(), "tensor", "type", "shape", "count", "nan", "inf", "min", "max", "mean", "std");
  };
  req.on_row = [&](const app::StatsRow& row) {
    if (a.json) return;
    const CheckpointTensor& t = *row.tensor;
    if (!row.result) {
      std::printf("%-48s %-8s %-20s unavailable: %s\n", t.name.c_str(), t.stored_type.c_str(), fmt_shape(t.shape).c_str(),
                  row.unavailable.c_str());
    } else if (shown == 1) {
      print_stats(t.name + "  " + t.stored_type + " " + fmt_shape(t.shape) + "  " + std::to_string(t.elements) + " elements, " +
                      format_bytes(static_cast<double>(t.bytes)) + (row.from_index ? "  (from the index)" : ""),
                  *row.result);
    } else {
      const auto& m = row.result->moments;
      std::printf("%-48s %-8s %-20s %12llu %6llu %6llu %12s %12s %12s %12s\n", t.name.c_str(), t.stored_type.c_str(),
                  fmt_shape(t.shape).c_str(), static_cast<unsigned long long>(m.count), static_cast<unsigned long long>(m.nan_count),
                  static_cast<unsigned long long>(m.inf_count), fmt(m.min).c_str(), fmt(m.max).c_str(), fmt(m.mean).c_str(),
                  fmt(m.std).c_str());
    }
    if (row.quantization) print_quantization(*row.quantization);
  };
  const app::StatsDocument doc = app::build_stats_document(req, rt.planner());
  if (fetched_from) remote->release(*fetched_from, fetched);
  if (a.json) {
    nlohmann::json j = doc.json();
    if (remote) j["file"] = a.path, remote->show_urls(j);
    print_json(j);
  }
  if (remote) std::fprintf(stderr, "tensormorph: %s\n", remote->transfer_text().c_str());
  doc.refuse_if_unserved(rt.constraints.strict_backend);
  doc.refuse_if_incomplete();
}

void run_stats(const StatsArgs& a) {
  if (serve_as_other_rank(a.compute)) return;  // under mpirun: ranks > 0 compute what rank 0 sends
  if (leads_ranks() && !a.raw.empty())
    throw Error(ErrorKind::InvalidArgument, "stats --raw reads one file in one process: run it without mpirun");
  if (a.raw.empty() == a.path.empty())
    throw Error(ErrorKind::InvalidArgument, "stats: give either a checkpoint PATH or --raw FILE with --dtype");
  if (!a.path.empty()) {
    run_checkpoint_stats(a, *command_runtime(&a.compute));
    return;
  }
  if (a.dtype.empty()) throw Error(ErrorKind::InvalidArgument, "--raw needs --dtype");
  const auto dtype = parse_dtype(a.dtype);
  if (!dtype) {
    std::string names;
    for (DType t : kAllDTypes) names += std::string(names.empty() ? "" : ", ") + std::string(dtype_name(t));
    throw Error(ErrorKind::InvalidArgument, "--dtype: unknown type '" + a.dtype + "' (known: " + names + ")");
  }
  std::optional<std::vector<uint64_t>> shape;
  if (a.shape) shape = parse_shape(*a.shape);
  const RawTensor t = open_raw_tensor(a.raw, *dtype, shape, a.offset);
  auto rt = command_runtime(&a.compute);
  const StatsOptions opt = options_from(a, *rt);
  const StatsResult r = compute_stats(t.data(), t.dtype, t.elements, rt->planner(), opt);
  if (a.json) print_json(raw_stats_json(t, r, a.raw));
  else print_stats(a.raw + "  " + std::string(dtype_name(t.dtype)) + " " + fmt_shape(t.shape) + "  " +
                       std::to_string(t.elements) + " elements, " + format_bytes(static_cast<double>(t.elements * dtype_size(t.dtype))) +
                       " at offset " + std::to_string(t.offset),
                   r);
}

}  // namespace

void add_stats_command(CLI::App& app) {
  auto args = std::make_shared<StatsArgs>();
  CLI::App* cmd = app.add_subcommand("stats", "exact statistics of a tensor (count, nan/inf/zero, min, max, "
                                              "abs_max, sum, mean, std, histogram, quantiles)");
  cmd->add_option("path", args->path, "a checkpoint: file, shard directory, index JSON, or an http(s):// or hf:// URL of one (or use --raw)");
  cmd->add_option("tensors", args->tensors, "tensor names (default: every tensor of PATH)");
  cmd->add_option("--raw", args->raw, "raw little-endian row-major tensor file");
  cmd->add_option("--dtype", args->dtype, "with --raw: element type: f64 f32 f16 bf16 f8_e4m3fn f8_e5m2 i8..i64 u8..u64 bool");
  cmd->add_option("--shape", args->shape, "dimensions, outermost first, e.g. 4096,11008 (default: 1-D, rest of file)");
  cmd->add_option("--offset", args->offset, "byte offset of the first element (default 0)");
  cmd->add_option("--bins", args->bins, "histogram bins (default 256)");
  cmd->add_option("--hist-range", args->hist_range, "histogram range LO,HI (default: finite min,max)")->delimiter(',');
  cmd->add_option("--hist-edges", args->hist_edges, "explicit histogram edges E0,E1,...,En (strictly increasing)")
      ->delimiter(',');
  cmd->add_option("--quantiles", args->quantiles, "probabilities in [0,1] (default 0.001,0.01,0.5,0.99,0.999)")
      ->delimiter(',');
  cmd->add_flag("--no-histogram", args->no_histogram, "skip the histogram");
  cmd->add_flag("--no-quantiles", args->no_quantiles, "skip the quantiles");
  cmd->add_flag("--quantization", args->quantization,
                "quantized tensors: also block-scale distribution, code usage, saturated codes, bits per weight");
  cmd->add_flag("--json", args->json, "print one JSON document");
  add_index_option(cmd, args->index_path);
  args->compute.add_to(cmd);
  cmd->callback([args] { run_stats(*args); });
}

}  // namespace tmorph::cli
