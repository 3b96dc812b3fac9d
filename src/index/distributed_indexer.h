// Indexing across the ranks of an MPI job (mpirun -np N tensormorph index|stats …).
//
// Rank 0 opens the index, decides which tensors need computing (tensors_to_index), splits them by bytes
// into one contiguous run per rank (rank_plan.h) and sends each rank its run. Every rank computes its
// tensors with its own workers and its own planner (its node's backends) and sends each tensor's
// result as it completes; rank 0 computes its own run meanwhile and is the only writer of the index,
// committing one tensor per transaction as results arrive, its own and the others'. A tensor is whole
// on one rank, so a result is committed only when all of it arrived; a rank that fails, or a job that
// is killed, leaves a valid index that the next run completes.
//
// Ranks > 0 do not run the command: they serve rank 0's requests (serve_indexing_request, and the
// 4D-STEM products' stem/distribution/distributed_products.h) until rank 0 ends the service with the job's exit code.
//
// Messages (protocol "indexing", tags 16..20, distributed/rank_services.h; sent and taken through
// distributed/rank_exchange.h): rank 0 -> r: plan (16); r -> 0: result (17), progress (18: bytes read, about five
// times a second), done (19: the rank's report), fail (20: the error, with the rank and host named).
#pragma once

#include "distributed/rank_services.h"
#include "distributed/world.h"
#include "index/indexer.h"

namespace tmorph {

// Rank 0 of a job with several ranks: index_checkpoint with the work split across the ranks. The report
// counts every rank's work (workers summed; window and read-ahead rank 0's). options.progress gets the
// whole job, with each rank's share in progress.ranks. When a rank fails, the others' results are still
// committed, then Error is thrown with the failed rank's kind, naming the rank, its host and its error.
IndexingReport index_checkpoint_across_ranks(CheckpointIndex& index, const Planner& planner, const IndexingOptions& options,
                                             World& world);

// The service ranks > 0 give: each request (a plan) computes its run, sending each tensor's result as it completes
// and then the rank's report, or the failure, to rank 0. `base` gives this rank's threads and memory budget; the plan
// gives the checkpoint, the tensors, the read rate, whether to build pyramids and the approximations consented to.
// `planner` and `base` are kept by reference (they outlive the service).
RankService indexing_rank_service(const Planner& planner, const IndexingOptions& base);

// Rank 0: whether other ranks are computing a plan now (an error that escapes then cannot wait for them:
// the job must be aborted).
bool ranks_are_working();

}  // namespace tmorph
