// tensormorph info / ls: what a checkpoint holds, straight from its headers (no data is read).
#include <fnmatch.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "app/checkpoint_json.h"
#include "app/remote_checkpoint.h"
#include "checkpoint/checkpoint.h"
#include "cli/commands.h"
#include "cli/index_access.h"
#include "cli/output.h"
#include "core/format.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

struct InventoryArgs {
  std::string path;
  std::string filter;
  std::string sort = "offset";
  std::string index_path;
  bool json = false;
};

// A remote path's transfer, on stderr (stdout stays the document).
void report_transfer(const app::RemoteCheckpoint* remote) {
  if (remote) std::fprintf(stderr, "tensormorph: %s\n", remote->transfer_text().c_str());
}

void run_info(const InventoryArgs& a) {
  const auto remote = app::open_remote_if_url(a.path);  // http(s):// or hf://: headers fetched into local stand-ins
  const auto index = open_index(remote ? remote->local_path() : a.path, a.index_path);
  const auto shown = [&](const std::string& p) { return remote ? remote->shown(p) : p; };
  const Checkpoint& c = index->checkpoint();
  struct TypeTotals {
    uint64_t tensors = 0, parameters = 0, bytes = 0;
  };
  std::map<std::string, TypeTotals> by_type;  // by stored type
  uint64_t parameters = 0, bytes = 0;
  for (const auto& t : c.tensors) {
    auto& e = by_type[t.stored_type];
    ++e.tensors, e.parameters += t.elements, e.bytes += t.bytes;
    parameters += t.elements, bytes += t.bytes;
  }
  // Effective bits per weight: stored bits (block scales and mins included) over parameters.
  auto bits_per_weight = [](uint64_t b, uint64_t p) { return p ? 8.0 * static_cast<double>(b) / static_cast<double>(p) : 0.0; };
  nlohmann::json files = nlohmann::json::array(), types = nlohmann::json::object();
  for (const auto& f : c.files) files.push_back({{"path", shown(f->path())}, {"size", f->size()}});
  for (const auto& [type, e] : by_type)
    types[type] = {{"tensors", e.tensors}, {"parameters", e.parameters}, {"bytes", e.bytes},
                   {"bits_per_weight", bits_per_weight(e.bytes, e.parameters)}};
  if (a.json) {
    print_json(nlohmann::json{{"path", a.path}, {"format", c.format}, {"files", files}, {"metadata", c.metadata},
                                {"tensor_count", c.tensors.size()}, {"parameters", parameters},
                                {"tensor_bytes", bytes}, {"bits_per_weight", bits_per_weight(bytes, parameters)},
                                {"by_type", types}});
    report_transfer(remote.get());
    return;
  }
  std::printf("%s: %s, %zu file(s), %zu tensors, %llu parameters, %s of tensor data (%.3g bits per weight)\n", a.path.c_str(),
              c.format.c_str(), c.files.size(), c.tensors.size(), static_cast<unsigned long long>(parameters),
              format_bytes(static_cast<double>(bytes)).c_str(), bits_per_weight(bytes, parameters));
  for (const auto& f : c.files) std::printf("  file %s (%s)\n", shown(f->path()).c_str(), format_bytes(static_cast<double>(f->size())).c_str());
  for (const auto& [type, e] : by_type)
    std::printf("  %-10s %6llu tensors %16llu parameters %8.4g bits per weight\n", type.c_str(),
                static_cast<unsigned long long>(e.tensors), static_cast<unsigned long long>(e.parameters),
                bits_per_weight(e.bytes, e.parameters));
  for (const auto& [k, v] : c.metadata) std::printf("  %s = %s\n", k.c_str(), v.size() > 80 ? (v.substr(0, 77) + "...").c_str() : v.c_str());
  report_transfer(remote.get());
}

void run_ls(const InventoryArgs& a) {
  const auto remote = app::open_remote_if_url(a.path);
  const auto index = open_index(remote ? remote->local_path() : a.path, a.index_path);
  const Checkpoint& c = index->checkpoint();
  std::vector<const CheckpointTensor*> rows;
  for (const auto& t : c.tensors)
    if (a.filter.empty() || fnmatch(a.filter.c_str(), t.name.c_str(), 0) == 0) rows.push_back(&t);
  using Less = bool (*)(const CheckpointTensor*, const CheckpointTensor*);
  const std::map<std::string, Less> orders = {
      {"offset", [](auto x, auto y) { return std::tie(x->file_index, x->file_offset) < std::tie(y->file_index, y->file_offset); }},
      {"name", [](auto x, auto y) { return x->name < y->name; }},
      {"size", [](auto x, auto y) { return x->bytes > y->bytes; }},
      {"elements", [](auto x, auto y) { return x->elements > y->elements; }},
      {"type", [](auto x, auto y) { return std::tie(x->stored_type, x->name) < std::tie(y->stored_type, y->name); }}};
  auto order = orders.find(a.sort);
  if (order == orders.end())
    throw Error(ErrorKind::InvalidArgument, "--sort: unknown field '" + a.sort + "' (offset, name, size, elements, type)");
  std::stable_sort(rows.begin(), rows.end(), order->second);
  nlohmann::json list = nlohmann::json::array();
  for (const auto* t : rows) {
    if (a.json) {
      nlohmann::json e = app::tensor_listing_json(c, *t);
      e["stats_indexed"] = index->has_stats(static_cast<size_t>(t - c.tensors.data()));
      list.push_back(e);
    } else {
      std::printf("%-48s %-8s %-20s %14llu %10s\n", t->name.c_str(), t->stored_type.c_str(), fmt_shape(t->shape).c_str(),
                  static_cast<unsigned long long>(t->elements), format_bytes(static_cast<double>(t->bytes)).c_str());
    }
  }
  if (remote) remote->show_urls(list);
  if (a.json) print_json(nlohmann::json{{"path", a.path}, {"format", c.format}, {"tensors", list}});
  report_transfer(remote.get());
}

}  // namespace

void add_inventory_commands(CLI::App& app) {
  auto args = std::make_shared<InventoryArgs>();
  CLI::App* info = app.add_subcommand("info", "a checkpoint's format, files, metadata and parameter count by type");
  info->add_option("path", args->path, "checkpoint: file, shard directory, index JSON or GGUF split shard, or an http(s):// or hf:// URL of one")->required();
  info->add_flag("--json", args->json, "print one JSON document");
  add_index_option(info, args->index_path);
  info->callback([args] { run_info(*args); });

  CLI::App* ls = app.add_subcommand("ls", "list a checkpoint's tensors (name, stored type, shape, size)");
  ls->add_option("path", args->path, "checkpoint: file, shard directory, index JSON or GGUF split shard, or an http(s):// or hf:// URL of one")->required();
  ls->add_option("--filter", args->filter, "only tensor names matching this glob, e.g. 'blk.*.attn_*'");
  ls->add_option("--sort", args->sort, "offset (default), name, size, elements or type");
  ls->add_flag("--json", args->json, "print one JSON document");
  add_index_option(ls, args->index_path);
  ls->callback([args] { run_ls(*args); });
}

}  // namespace tmorph::cli
