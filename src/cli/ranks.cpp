#include "cli/ranks.h"

#include "app/rank_worker.h"
#include "distributed/world.h"
#include "index/distributed_indexer.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

bool g_served = false;
int g_served_code = 0;

// The commands that run across ranks: the first two words of the command line that are not options.
bool runs_across_ranks(const std::vector<std::string>& words) {
  if (words.empty()) return false;
  if (words[0] == "index" || words[0] == "stats") return true;
  if (words[0] != "stem" || words.size() < 2) return false;
  for (const char* s : {"bf", "abf", "adf", "haadf", "df", "mask", "com", "dpc", "idpc", "fft", "mean-dp", "prepare", "ssb"})
    if (words[1] == s) return true;
  return false;
}

}  // namespace

void join_ranks(int* argc, char*** argv, const std::vector<std::string>& words) {
  World& world = World::instance();
  if (World::launched_by_mpi() && !World::built_with_mpi())
    throw Error(ErrorKind::Unavailable, "started by an MPI launcher, but this build of tensormorph has no MPI "
                                        "(install libopenmpi-dev and rebuild), so each rank would run alone");
  world.init(argc, argv);
  if (world.distributed() && !runs_across_ranks(words)) {
    const std::string command = words.empty() ? "" : words[0] == "stem" && words.size() > 1 ? "stem " + words[1] : words[0];
    throw Error(ErrorKind::InvalidArgument, "'" + command + "' does not run across MPI ranks (" + std::to_string(world.size()) +
                                                " here): index, stats and the 4D-STEM products (stem bf|abf|adf|haadf|df|mask|"
                                                "com|dpc|idpc|fft|mean-dp|prepare|ssb) do; run it without mpirun");
  }
}

bool serve_as_other_rank(const ComputeFlags& flags) {
  World& world = World::instance();
  if (world.rank() == 0) return false;
  const auto rt = command_runtime(&flags);
  g_served_code = app::serve_as_worker_rank(*rt, world);  // the rank services' loop (app/rank_worker.h)
  g_served = true;
  return true;
}

bool leads_ranks() { return World::instance().distributed() && World::instance().rank() == 0; }

int leave_ranks(int code) {
  World& world = World::instance();
  if (world.distributed()) {
    if (world.rank() == 0) {
      if (ranks_are_working()) world.abort(code);  // the error is printed; the others cannot be waited for
      world.end_service(code);
    } else if (g_served) {
      code = g_served_code;
    }
  }
  world.finalize();
  return code;
}

}  // namespace tmorph::cli
