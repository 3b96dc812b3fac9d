// The CLI under an MPI launcher (mpirun -np N tensormorph …; docs/scaling.md). Rank 0 runs the command
// and shares its indexing with the other ranks (index/distributed_indexer.h); the other ranks serve that
// indexing and 4D-STEM product passes instead of running the command, and print nothing. `index`,
// `stats` of a checkpoint and the 4D-STEM products (stem bf…mean-dp, prepare) run across ranks; any other
// command is refused with a clear error when the job has more than one rank.
#pragma once

#include <string>
#include <vector>

#include "cli/compute_flags.h"

namespace tmorph::cli {

// Joins the MPI job when a launcher started this process (distributed/world.h). Throws InvalidArgument
// when the job has several ranks and the command (`words`: the command line's words that are not
// options, e.g. {"stem", "bf", PATH}) cannot run across them.
void join_ranks(int* argc, char*** argv, const std::vector<std::string>& words);

// On a rank > 0: serves rank 0's requests (app/rank_worker.h: every protocol's rank service) with the runtime
// `flags` give (this node's backends and cores) until rank 0 ends the job, then returns true. On rank 0 and in a
// one-process run: false.
bool serve_as_other_rank(const ComputeFlags& flags);

// Whether this process is rank 0 of a job with several ranks.
bool leads_ranks();

// At exit, with the command's exit code: rank 0 ends the other ranks' service with it, or aborts the
// job when they are still computing (an error left it unable to wait for them); every rank leaves MPI.
// Returns the process's exit code (a served rank's is rank 0's).
int leave_ranks(int code);

}  // namespace tmorph::cli
