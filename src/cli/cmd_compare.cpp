// tensormorph compare A B: per-tensor error of checkpoint B (quantized, lower precision) against A.
#include <cstdio>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/compare_document.h"
#include "app/remote_checkpoint.h"
#include "cli/commands.h"
#include "cli/remote_note.h"
#include "cli/compute_flags.h"
#include "cli/output.h"

namespace tmorph::cli {

namespace {

struct CompareArgs {
  std::string a, b;
  std::vector<std::string> tensors;
  bool json = false;
  ComputeFlags compute;
};

// A row's number as the table prints it (a non-finite one is already the text fmt prints: "nan", "inf", "-inf").
std::string cell(const nlohmann::json& row, const char* key) {
  return row[key].is_number() ? fmt(row[key].get<double>()) : row[key].get<std::string>();
}

void run_compare(const CompareArgs& a) {
  const auto rt = command_runtime(&a.compute);
  const Planner planner = rt->planner();
  if (!a.json)
    std::printf("%-44s %-7s %-7s %12s %12s %11s %10s %8s\n", "tensor", "A", "B", "rmse", "max |diff|", "rel error", "cosine",
                "SNR dB");
  // Pairs with NaN or Inf on either side are left out of the figures: the text says how many, after the table.
  auto nonfinite = std::make_shared<std::vector<std::pair<std::string, uint64_t>>>();
  const auto print_row = [nonfinite](const nlohmann::json& r) {
    if (const uint64_t n = r.value("nonfinite", uint64_t{0}); n > 0) nonfinite->emplace_back(r["name"].get<std::string>(), n);
    std::printf("%-44s %-7s %-7s %12s %12s %11s %10s %8s\n", r["name"].get<std::string>().c_str(),
                r["type_a"].get<std::string>().c_str(), r["type_b"].get<std::string>().c_str(), cell(r, "rmse").c_str(),
                cell(r, "max_abs_diff").c_str(), cell(r, "rel_error").c_str(), cell(r, "cosine").c_str(),
                cell(r, "snr_db").c_str());
  };
  app::RemotePair pair(a.a, a.b);  // remote sides: each pair's tensors fetched while it is measured
  const RemoteTransferNote note_b(pair.b()), note_a(pair.a());
  nlohmann::json doc = app::compare_document(pair.path_a(), pair.path_b(), a.tensors, planner, rt->threads,
                                             a.json ? std::function<void(const nlohmann::json&)>() : print_row,
                                             pair.around_pair());
  pair.show_given(doc);
  if (a.json) {
    print_json(doc);
    return;
  }
  for (const auto& [name, n] : *nonfinite)
    std::printf("left out of %s's figures: %llu element pair(s) with NaN or Inf in A or B\n", name.c_str(),
                static_cast<unsigned long long>(n));
  for (const auto& s : doc["skipped"])
    std::printf("skipped %s: %s\n", s["name"].get<std::string>().c_str(), s["reason"].get<std::string>().c_str());
  if (!doc["only_in_a"].empty()) std::printf("%zu tensor(s) only in A\n", doc["only_in_a"].size());
  if (!doc["only_in_b"].empty()) std::printf("%zu tensor(s) only in B\n", doc["only_in_b"].size());
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand("compare", "error of checkpoint B against reference A, tensor by tensor (RMSE, max "
                                                "|diff|, relative error, cosine similarity, SNR)");
  cmd->add_option("a", args->a, "reference checkpoint (e.g. the F16 or BF16 model)")->required();
  cmd->add_option("b", args->b, "checkpoint measured against it (e.g. its Q4_K quantization)")->required();
  cmd->add_option("tensors", args->tensors, "tensor names (default: every tensor in both)");
  cmd->add_flag("--json", args->json, "print one JSON document");
  args->compute.add_to(cmd);
  cmd->callback([args] { run_compare(*args); });
}

}  // namespace tmorph::cli
