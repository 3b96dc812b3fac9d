#include "cli/index_access.h"

#include <unistd.h>

#include <cstdio>
#include <memory>

#include "app/indexing.h"
#include "cli/compute_flags.h"
#include "cli/progress_line.h"
#include "cli/ranks.h"
#include "distributed/world.h"
#include "index/distributed_indexer.h"
#include "core/format.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

// Across MPI ranks: each rank's share done, and the rank furthest behind ("" in one process).
std::string ranks_text(const IndexingProgress& p) {
  if (p.ranks.size() < 2) return "";
  std::string text = "  ranks";
  size_t slowest = 0;
  double slowest_frac = 2;
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    const auto& k = p.ranks[r];
    const double frac = k.bytes_total ? static_cast<double>(k.bytes_done) / static_cast<double>(k.bytes_total) : 1.0;
    char part[64];
    std::snprintf(part, sizeof part, " %zu:%.0f%%", r, 100 * frac);
    text += part;
    if (k.bytes_total && frac < slowest_frac) slowest_frac = frac, slowest = r;
  }
  if (slowest_frac < 1) {
    const auto& k = p.ranks[slowest];
    text += "  slowest: rank " + std::to_string(slowest) + ", " +
            format_bytes(static_cast<double>(k.bytes_total - k.bytes_done)) + " to go";
  }
  return text;
}

// One line on stderr, redrawn in place (a terminal) or printed as a line of its own every few seconds
// (a pipe, e.g. mpirun's forwarding of rank 0's stderr): bar, bytes done of total, rate, ETA, tensors,
// and across MPI ranks each rank's share.
void draw_progress(const IndexingProgress& p, bool last, bool terminal) {
  const double frac = p.bytes_total ? static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total) : 1.0;
  const double rate = p.seconds > 0 ? static_cast<double>(p.bytes_done) / p.seconds : 0;
  const double eta = rate > 0 ? static_cast<double>(p.bytes_total - p.bytes_done) / rate : -1;
  std::fprintf(stderr, "%s%s %5.1f%%  %s / %s  %s/s  ETA %s  %zu/%zu tensors%s%s%s", terminal ? "\r" : "", bar_text(frac).c_str(),
               100 * frac, format_bytes(static_cast<double>(p.bytes_done)).c_str(),
               format_bytes(static_cast<double>(p.bytes_total)).c_str(), format_bytes(rate).c_str(), clock_text(eta).c_str(),
               p.tensors_done, p.tensors_total, ranks_text(p).c_str(), terminal ? "\x1b[K" : "", last || !terminal ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace

void add_index_option(CLI::App* cmd, std::string& index_path) {
  cmd->add_option("--index", index_path,
                  "the index database to use (default: $XDG_CACHE_HOME/tensormorph/index/, one per checkpoint)");
}

IndexingReport fill_index(CheckpointIndex& index, const Runtime& rt, const std::vector<size_t>& only, bool quiet,
                          bool pyramids, uint64_t max_bytes_per_s) {
  IndexingOptions opt = app::indexing_options(rt, only, pyramids);
  opt.max_bytes_per_s = max_bytes_per_s;
  const bool terminal = isatty(STDERR_FILENO);
  if (!quiet && terminal) {
    opt.progress = [](const IndexingProgress& p) {
      if (p.tensors_total) draw_progress(p, p.tensors_done == p.tensors_total, true);
    };
  }
  if (!leads_ranks()) return index_checkpoint(index, rt.planner(), opt);
  // Rank 0 of an MPI job: its stderr is usually a pipe (mpirun forwards it), so without a terminal the
  // whole job's progress is a line every 2 s and one at the end.
  if (!quiet && !terminal) {
    auto last = std::make_shared<double>(-1);
    opt.progress = [last](const IndexingProgress& p) {
      const bool end = p.tensors_done == p.tensors_total;
      if (!p.tensors_total || (!end && p.seconds - *last < 2) || (end && *last >= 1e300)) return;
      draw_progress(p, end, false);
      *last = end ? 1e301 : p.seconds;
    };
  }
  return index_checkpoint_across_ranks(index, rt.planner(), opt, World::instance());
}

}  // namespace tmorph::cli
