// tensormorph diff A B: what changed between two checkpoints and where (difference pyramids, rankings, the
// per-layer strip); docs/diff.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/diff_document.h"
#include "app/remote_checkpoint.h"
#include "cli/remote_note.h"
#include "cli/commands.h"
#include "cli/compute_flags.h"
#include "cli/output.h"
#include "core/json_number.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

struct DiffArgs {
  std::string a, b, index;
  std::vector<std::string> tensors;
  size_t top = 10;
  int level = -1;
  bool json = false;
  ComputeFlags compute;
};

double number(const nlohmann::json& j) { return number_from_json(j).value_or(std::nan("")); }

// One character per layer: its relative change against the largest layer's, in eight steps.
std::string strip_picture(const nlohmann::json& strip) {
  static const char* const kBlocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  double top = 0;
  for (const auto& s : strip)
    if (std::isfinite(number(s["rel_change"]))) top = std::max(top, number(s["rel_change"]));
  std::string out;
  for (const auto& s : strip) {
    const double v = number(s["rel_change"]);
    if (!std::isfinite(v)) out += "?";
    else out += kBlocks[top > 0 ? std::min(7, static_cast<int>(v / top * 7.999)) : 0];
  }
  return out;
}

void print_human(const nlohmann::json& doc, size_t top) {
  std::printf("A: %s (%s)\nB: %s (%s)\nnames: %s\nindex: %s%s\n", doc["a"].get<std::string>().c_str(),
              doc["format_a"].get<std::string>().c_str(), doc["b"].get<std::string>().c_str(),
              doc["format_b"].get<std::string>().c_str(), doc["name_mapping"].get<std::string>().c_str(),
              doc["index"]["database"].get<std::string>().c_str(),
              doc["index"].contains("warning") ? (" (" + doc["index"]["warning"].get<std::string>() + ")").c_str() : "");
  if (!doc["adapter"].is_null())
    std::printf("adapter: PEFT LoRA, rank %llu, alpha %s, scale %s%s%s\n",
                static_cast<unsigned long long>(doc["adapter"]["rank"].get<uint64_t>()), fmt(number(doc["adapter"]["alpha"])).c_str(),
                fmt(number(doc["adapter"]["scale"])).c_str(), doc["adapter"]["use_rslora"].get<bool>() ? " (rsLoRA: alpha / sqrt(r))" : "",
                doc["adapter"]["fan_in_fan_out"].get<bool>() ? ", fan_in_fan_out" : "");
  std::map<std::string, const nlohmann::json*> by_name;
  for (const auto& p : doc["pairs"]) by_name[p["name"].get<std::string>()] = &p;
  std::printf("\n%zu pair(s) compared; the %zu with the largest relative change:\n", doc["pairs"].size(),
              doc["ranking"]["tensors"].size());
  std::printf("%-44s %-16s %-6s %-6s %9s %12s %11s %10s\n", "tensor", "shape", "A", "B", "changed", "max |Δ|", "rel change",
              "cosine");
  for (const auto& r : doc["ranking"]["tensors"]) {
    const auto& p = *by_name.at(r["name"].get<std::string>());
    const auto& d = p["difference"];
    std::printf("%-44s %-16s %-6s %-6s %8.3g%% %12s %11s %10s\n", p["name"].get<std::string>().c_str(),
                fmt_shape(p["shape"].get<std::vector<uint64_t>>()).c_str(), p["type_a"].get<std::string>().c_str(),
                p["type_b"].get<std::string>().c_str(), 100 * number(d["changed_fraction"]), fmt(number(d["max_abs_delta"])).c_str(),
                fmt(number(d["rel_change"])).c_str(), fmt(number(d["cosine"])).c_str());
  }
  if (!doc["layer_strip"].empty()) {
    std::printf("\nlayers by relative change (largest first):\n");
    for (const auto& l : doc["ranking"]["layers"])
      std::printf("  layer %-4llu %11s  (%zu tensors)\n", static_cast<unsigned long long>(l["layer"].get<uint64_t>()),
                  fmt(number(l["rel_change"])).c_str(), l["tensors"].get<size_t>());
    std::printf("per-layer strip, layer %llu to %llu: %s\n",
                static_cast<unsigned long long>(doc["layer_strip"].front()["layer"].get<uint64_t>()),
                static_cast<unsigned long long>(doc["layer_strip"].back()["layer"].get<uint64_t>()),
                strip_picture(doc["layer_strip"]).c_str());
  }
  for (const auto& p : doc["pairs"]) {
    if (!p.contains("qk_permutation")) continue;
    const auto& q = p["qk_permutation"];
    if (q.contains("unchecked"))
      std::printf("Q/K permutation of %s not checked: %s\n", p["name"].get<std::string>().c_str(), q["unchecked"].get<std::string>().c_str());
    else
      std::printf("Q/K permutation of %s (%s): %s; Σ Δ² of the first head's %llu rows %s as stored, %s un-permuted\n",
                  p["name"].get<std::string>().c_str(), p["name_b"].get<std::string>().c_str(), q["verdict"].get<std::string>().c_str(),
                  static_cast<unsigned long long>(q["sample_rows"].get<uint64_t>()), fmt(number(q["sum_sq_delta_as_stored"])).c_str(),
                  fmt(number(q["sum_sq_delta_unpermuted"])).c_str());
  }
  for (const auto& s : doc["skipped"])
    std::printf("skipped %s: %s\n", s["name"].get<std::string>().c_str(), s["reason"].get<std::string>().c_str());
  if (!doc["only_in_a"].empty()) std::printf("%zu tensor(s) only in A\n", doc["only_in_a"].size());
  if (!doc["only_in_b"].empty()) std::printf("%zu tensor(s) only in B\n", doc["only_in_b"].size());
  (void)top;
}

void run_diff(const DiffArgs& a) {
  const auto rt = command_runtime(&a.compute);
  const Planner planner = rt->planner();
  DiffOptions options;
  options.tensors = a.tensors;
  options.index_path = a.index;
  options.threads = rt->threads;
  options.keep_tiles = a.level >= 0;
  app::DiffDocumentOptions doc_options;
  doc_options.top = a.top;
  if (a.level >= 0) doc_options.level = static_cast<unsigned>(a.level);
  // Remote sides (http(s)://, hf://, s3://): headers fetched into local stand-ins, each pair's tensors fetched before it
  // is read and released after, so no copy of a remote checkpoint is kept (docs/remote.md).
  app::RemotePair pair(a.a, a.b);
  const RemoteTransferNote note_b(pair.b()), note_a(pair.a());  // destroyed in reverse: A's line first
  options.around_pair = pair.around_pair();
  nlohmann::json doc = app::diff_document(diff_checkpoints(pair.path_a(), pair.path_b(), planner, options), doc_options);
  pair.show_given(doc);
  if (a.json) print_json(doc);
  else print_human(doc, a.top);

}

}  // namespace

void add_diff_command(CLI::App& app) {
  auto args = std::make_shared<DiffArgs>();
  CLI::App* cmd = app.add_subcommand("diff", "what changed between checkpoints A and B, and where: exact difference pyramids "
                                             "per tensor pair, tensors and layers ranked by relative change (docs/diff.md)");
  cmd->add_option("a", args->a, "checkpoint A (the reference, e.g. the base model)")->required();
  cmd->add_option("b", args->b, "checkpoint B (e.g. the fine-tune, a GGUF conversion of A, or a PEFT LoRA adapter folder over A)")
      ->required();
  cmd->add_option("tensors", args->tensors, "A's tensor names to compare (default: every matched pair)");
  cmd->add_option("--top", args->top, "rows of each ranking (default 10)")->check(CLI::Range(size_t{1}, size_t{1} << 30));
  cmd->add_option("--level", args->level, "with named tensors: include every tile of this pyramid level (0 = finest) in --json")
      ->check(CLI::Range(0, 64));
  cmd->add_option("--index", args->index, "the difference index file (default: in the cache folder, keyed by both paths)");
  cmd->add_flag("--json", args->json, "print one JSON document");
  args->compute.add_to(cmd);
  cmd->callback([args] {
    if (args->level >= 0 && args->tensors.empty())
      throw Error(ErrorKind::InvalidArgument, "--level lists every tile of each pair: name the tensors it is for");
    run_diff(*args);
  });
}

}  // namespace tmorph::cli
