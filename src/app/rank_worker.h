// A rank > 0 of an MPI job (mpirun -np N tensormorph …; docs/scaling.md): it does not run the command but serves
// rank 0's requests, with this node's runtime, through the rank services every protocol registers
// (distributed/rank_services.h): indexing (index/distributed_indexer.h), 4D-STEM product bands and SSB bands
// (stem/distribution/). A face calls serve_as_worker_rank and prints nothing.
#pragma once

#include <cstdint>

#include "app/runtime.h"
#include "distributed/rank_services.h"
#include "index/indexer.h"
#include "tensormorph/planner.h"

namespace tmorph::app {

// Every protocol's service, with this rank's planner, indexing options (threads, memory budget), threads and
// memory budget; each handler keeps references to them. Error(Internal) when two protocols' tag ranges overlap.
RankServiceRegistry rank_services(const Planner& planner, const IndexingOptions& indexing, unsigned threads, uint64_t memory_budget);

// A rank > 0: serves rank 0's requests with `rt` until rank 0 ends the service; returns the exit code rank 0 sent.
int serve_as_worker_rank(const Runtime& rt, World& world);

}  // namespace tmorph::app
