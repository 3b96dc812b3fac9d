#include "cli/ranks.h"

#include "app/indexing.h"
#include "distributed/world.h"
#include "index/distributed_indexer.h"
#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

bool g_served = false;
int g_served_code = 0;

}  // namespace

void join_ranks(int* argc, char*** argv, const std::string& command) {
  World& world = World::instance();
  if (World::launched_by_mpi() && !World::built_with_mpi())
    throw Error(ErrorKind::Unavailable, "started by an MPI launcher, but this build of tensormorph has no MPI "
                                        "(install libopenmpi-dev and rebuild), so each rank would run alone");
  world.init(argc, argv);
  if (world.distributed() && command != "index" && command != "stats")
    throw Error(ErrorKind::InvalidArgument, "'" + command + "' does not run across MPI ranks (" + std::to_string(world.size()) +
                                                " here): only index and stats of a checkpoint do; run it without mpirun");
}

bool serve_as_other_rank(const ComputeFlags& flags) {
  World& world = World::instance();
  if (world.rank() == 0) return false;
  const auto rt = make_runtime(&flags);
  g_served_code = serve_indexing_requests(rt->planner(), app::indexing_options(*rt, {}, true), world);
  g_served = true;
  return true;
}

bool leads_ranks() { return World::instance().distributed() && World::instance().rank() == 0; }

int leave_ranks(int code) {
  World& world = World::instance();
  if (world.distributed()) {
    if (world.rank() == 0) {
      if (ranks_are_working()) world.abort(code);  // the error is printed; the others cannot be waited for
      end_indexing_service(world, code);
    } else if (g_served) {
      code = g_served_code;
    }
  }
  world.finalize();
  return code;
}

}  // namespace tmorph::cli
