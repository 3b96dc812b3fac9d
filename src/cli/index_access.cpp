#include "cli/index_access.h"

#include <unistd.h>

#include <cstdio>

#include "app/indexing.h"
#include "cli/compute_flags.h"
#include "core/format.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

// "1:05" or "2:03:07"; "--:--" when unknown.
std::string clock_text(double seconds) {
  if (!(seconds >= 0) || seconds > 360000) return "--:--";
  const auto s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

// One line on stderr, redrawn in place: bar, bytes done of total, rate, ETA, tensors.
void draw_progress(const IndexingProgress& p, bool last) {
  const double frac = p.bytes_total ? static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total) : 1.0;
  const int width = 24, filled = static_cast<int>(frac * width);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, '.');
  const double rate = p.seconds > 0 ? static_cast<double>(p.bytes_done) / p.seconds : 0;
  const double eta = rate > 0 ? static_cast<double>(p.bytes_total - p.bytes_done) / rate : -1;
  std::fprintf(stderr, "\r[%s] %5.1f%%  %s / %s  %s/s  ETA %s  %zu/%zu tensors\x1b[K%s", bar.c_str(), 100 * frac,
               format_bytes(static_cast<double>(p.bytes_done)).c_str(), format_bytes(static_cast<double>(p.bytes_total)).c_str(),
               format_bytes(rate).c_str(), clock_text(eta).c_str(), p.tensors_done, p.tensors_total, last ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace

void add_index_option(CLI::App* cmd, std::string& index_path) {
  cmd->add_option("--index", index_path,
                  "the index database to use (default: $XDG_CACHE_HOME/tensormorph/index/, one per checkpoint)");
}

IndexingReport fill_index(CheckpointIndex& index, const Runtime& rt, const std::vector<size_t>& only, bool quiet,
                          bool pyramids) {
  IndexingOptions opt = app::indexing_options(rt, only, pyramids);
  if (!quiet && isatty(STDERR_FILENO)) {
    opt.progress = [](const IndexingProgress& p) {
      if (p.tensors_total) draw_progress(p, p.tensors_done == p.tensors_total);
    };
  }
  return index_checkpoint(index, rt.planner(), opt);
}

size_t tensor_index(const Checkpoint& c, const std::string& path, const std::string& name) {
  for (size_t i = 0; i < c.tensors.size(); ++i)
    if (c.tensors[i].name == name) return i;
  throw Error(ErrorKind::InvalidArgument, path + ": no tensor named '" + name + "'");
}

}  // namespace tmorph::cli
