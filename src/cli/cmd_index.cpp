// tensormorph index: compute and store the exact statistics of every tensor of a checkpoint.
#include <algorithm>
#include <cstdio>
#include <chrono>
#include <future>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "cli/index_access.h"
#include "cli/compute_flags.h"
#include "cli/ranks.h"
#include "app/indexing.h"
#include "app/remote_checkpoint.h"
#include "core/byte_size.h"
#include "core/format.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

struct IndexArgs {
  std::string path;
  std::string index_path;
  bool json = false;
  bool no_pyramid = false;
  std::string max_rate;  // --max-read-rate
  ComputeFlags compute;
};

// A remote checkpoint, streamed (app::index_remote), then a pass that reads nothing (every tensor is indexed or
// unreadable) for the report's totals.
IndexingReport index_remote(CheckpointIndex& index, const Runtime& rt, app::RemoteCheckpoint& remote, const IndexArgs& a,
                            uint64_t max_rate) {
  const IndexingReport sum = app::index_remote(index, remote, app::indexing_options(rt, {}, true).memory_budget,
                                               [&](const std::vector<size_t>& batch) {
                                                 return fill_index(index, rt, batch, a.json, !a.no_pyramid, max_rate);
                                               });
  return app::remote_indexing_report(fill_index(index, rt, {}, true, !a.no_pyramid, max_rate), sum);
}

void run_index(const IndexArgs& a) {
  if (serve_as_other_rank(a.compute)) return;  // under mpirun: ranks > 0 compute what rank 0 sends
  auto rt = command_runtime(&a.compute);
  const auto remote = app::open_remote_if_url(a.path);  // http(s):// or hf://: headers into local stand-ins
  if (remote && leads_ranks()) throw Error(ErrorKind::Unavailable, a.path + ": a remote checkpoint is indexed by one process (run it without mpirun)");
  auto index = open_index(remote ? remote->local_path() : a.path, a.index_path);
  uint64_t max_rate = 0;
  if (!a.max_rate.empty() && (max_rate = parse_bytes(a.max_rate, "--max-read-rate")) == 0)
    throw Error(ErrorKind::InvalidArgument, "--max-read-rate: expected more than 0 bytes per second");
  const IndexingReport r = remote ? index_remote(*index, *rt, *remote, a, max_rate) : fill_index(*index, *rt, {}, a.json, !a.no_pyramid, max_rate);
  if (remote) std::fprintf(stderr, "tensormorph: %s\n", remote->transfer_text().c_str());
  const IndexOpenReport& o = index->report();
  const double rate = r.seconds > 0 ? static_cast<double>(r.bytes) / r.seconds : 0;
  // Everything indexable was indexed and reported; then a damaged checkpoint ends with exit 7.
  const auto refuse_if_incomplete = [&] {
    if (r.damaged)
      throw Error(ErrorKind::Incomplete, a.path + ": " + std::to_string(r.damaged) + " of " +
                                             std::to_string(index->checkpoint().tensors.size()) +
                                             " tensors could not be indexed: their data is missing or damaged (`stats` names each)");
  };
  if (a.json) {
    nlohmann::json j = app::indexing_report_json(a.path, *index, r);
    if (remote) remote->show_urls(j);
    print_json(j);
    refuse_if_incomplete();
    return;
  }
  std::printf("%s: %zu tensors: %zu computed now, %zu already indexed, %zu without a kernel yet", a.path.c_str(),
              index->checkpoint().tensors.size(), r.computed, r.already_indexed, r.unavailable - r.damaged);
  if (r.damaged) std::printf(", %zu with missing or damaged data", r.damaged);
  std::printf("\n");
  if (r.computed)
    std::printf("  read %s in %.2f s (%s/s) with %u worker(s)%s, %s reads, %s read ahead\n",
                format_bytes(static_cast<double>(r.bytes)).c_str(), r.seconds, format_bytes(rate).c_str(), r.workers,
                r.ranks > 1 ? (" on " + std::to_string(r.ranks) + " MPI ranks").c_str() : "",
                format_bytes(static_cast<double>(r.window_bytes)).c_str(), format_bytes(static_cast<double>(r.readahead_bytes)).c_str());
  for (const auto& f : o.reindexed_files) std::printf("  (re)read header of %s\n", (remote ? remote->shown(f) : f).c_str());
  std::printf("  index: %s%s\n", o.database.c_str(), o.persisted ? "" : " (not saved)");
  refuse_if_incomplete();
}

}  // namespace

void add_index_command(CLI::App& app) {
  auto args = std::make_shared<IndexArgs>();
  CLI::App* cmd = app.add_subcommand("index", "compute and store the exact statistics of every tensor of a checkpoint "
                                              "(resumable; reopening reads only the index)");
  cmd->add_option("path", args->path, "checkpoint: file, shard directory, index JSON or GGUF split shard, or an http(s):// or hf:// URL of one")->required();
  add_index_option(cmd, args->index_path);
  cmd->add_flag("--json", args->json, "print one JSON document (no progress bar)");
  cmd->add_flag("--no-pyramid", args->no_pyramid, "skip the statistics pyramids (render then reads the values)");
  cmd->add_option("--max-read-rate", args->max_rate,
                  "average read rate of tensor data, bytes per second with a K/M/G suffix (default: unlimited; "
                  "across MPI ranks: per rank), to leave the disk to other work");
  args->compute.add_to(cmd);
  cmd->callback([args] { run_index(*args); });
}

}  // namespace tmorph::cli
