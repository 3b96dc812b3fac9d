// tensormorph compare A B: per-tensor error of checkpoint B (quantized, lower precision) against A.
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/result_json.h"
#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "cli/output.h"
#include "cli/compute_flags.h"
#include "checkpoint/compare.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

struct CompareArgs {
  std::string a, b;
  std::vector<std::string> tensors;
  bool json = false;
  ComputeFlags compute;
};

void run_compare(const CompareArgs& a) {
  const auto rt = make_runtime(&a.compute);
  const Planner planner = rt->planner();
  const Checkpoint ca = open_checkpoint(a.a), cb = open_checkpoint(a.b);
  std::map<std::string, const CheckpointTensor*> in_b;
  for (const auto& t : cb.tensors) in_b[t.name] = &t;
  for (const auto& name : a.tensors)
    if (!in_b.count(name) || std::none_of(ca.tensors.begin(), ca.tensors.end(), [&](const auto& t) { return t.name == name; }))
      throw Error(ErrorKind::InvalidArgument, "tensor '" + name + "' is not in both checkpoints");
  nlohmann::json rows = nlohmann::json::array(), only_a = nlohmann::json::array(), skipped = nlohmann::json::array();
  if (!a.json)
    std::printf("%-44s %-7s %-7s %12s %12s %11s %10s %8s\n", "tensor", "A", "B", "rmse", "max |diff|", "rel error", "cosine",
                "SNR dB");
  for (const auto& ta : ca.tensors) {
    if (!a.tensors.empty() && std::find(a.tensors.begin(), a.tensors.end(), ta.name) == a.tensors.end()) continue;
    auto it = in_b.find(ta.name);
    if (it == in_b.end()) {
      only_a.push_back(ta.name);
      continue;
    }
    const CheckpointTensor& tb = *it->second;
    in_b.erase(it);
    if (ta.shape != tb.shape) {
      skipped.push_back({{"name", ta.name}, {"reason", "shape " + fmt_shape(ta.shape) + " against " + fmt_shape(tb.shape)}});
      continue;
    }
    const TensorDiff d = compare_tensors(ca, ta, cb, tb, planner, rt->threads);
    nlohmann::json row = app::compare_json(d);
    row.update({{"name", ta.name}, {"type_a", ta.stored_type}, {"type_b", tb.stored_type}, {"shape", ta.shape}});
    rows.push_back(std::move(row));
    if (!a.json)
      std::printf("%-44s %-7s %-7s %12s %12s %11s %10s %8s\n", ta.name.c_str(), ta.stored_type.c_str(), tb.stored_type.c_str(),
                  fmt(d.rmse).c_str(), fmt(d.max_abs).c_str(), fmt(d.rel_error).c_str(), fmt(d.cosine).c_str(),
                  fmt(d.snr_db).c_str());
  }
  nlohmann::json only_b = nlohmann::json::array();
  if (a.tensors.empty())
    for (const auto& [name, t] : in_b) only_b.push_back(name);
  if (a.json) {
    print_json(nlohmann::json{{"a", a.a}, {"b", a.b}, {"tensors", rows}, {"only_in_a", only_a}, {"only_in_b", only_b},
                                {"skipped", skipped}});
    return;
  }
  for (const auto& s : skipped) std::printf("skipped %s: %s\n", s["name"].get<std::string>().c_str(), s["reason"].get<std::string>().c_str());
  if (!only_a.empty()) std::printf("%zu tensor(s) only in A\n", only_a.size());
  if (!only_b.empty()) std::printf("%zu tensor(s) only in B\n", only_b.size());
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
