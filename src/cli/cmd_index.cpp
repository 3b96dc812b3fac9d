// tensormorph index: compute and store the exact statistics of every tensor of a checkpoint.
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/output.h"
#include "cli/index_access.h"
#include "cli/compute_flags.h"
#include "cli/ranks.h"
#include "app/indexing.h"
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

void run_index(const IndexArgs& a) {
  if (serve_as_other_rank(a.compute)) return;  // under mpirun: ranks > 0 compute what rank 0 sends
  auto rt = command_runtime(&a.compute);
  auto index = open_index(a.path, a.index_path);
  uint64_t max_rate = 0;
  if (!a.max_rate.empty() && (max_rate = parse_bytes(a.max_rate, "--max-read-rate")) == 0)
    throw Error(ErrorKind::InvalidArgument, "--max-read-rate: expected more than 0 bytes per second");
  const IndexingReport r = fill_index(*index, *rt, {}, a.json, !a.no_pyramid, max_rate);
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
    print_json(app::indexing_report_json(a.path, *index, r));
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
  for (const auto& f : o.reindexed_files) std::printf("  (re)read header of %s\n", f.c_str());
  std::printf("  index: %s%s\n", o.database.c_str(), o.persisted ? "" : " (not saved)");
  refuse_if_incomplete();
}

}  // namespace

void add_index_command(CLI::App& app) {
  auto args = std::make_shared<IndexArgs>();
  CLI::App* cmd = app.add_subcommand("index", "compute and store the exact statistics of every tensor of a checkpoint "
                                              "(resumable; reopening reads only the index)");
  cmd->add_option("path", args->path, "checkpoint: file, shard directory, index JSON or GGUF split shard")->required();
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
