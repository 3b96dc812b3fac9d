// 4D-STEM products across the ranks of an MPI job (mpirun -np N tensormorph stem bf|…|mean-dp|prepare).
//
// Rank 0 splits the request's output scan rows into one band per rank (whole scan bins, so binning is
// unchanged), sends each rank its band as a request for that scan region, computes its own band, and
// merges: per-position sums (totals, CoM sums, detector images) are concatenated in band order, pattern
// sums added and maxima taken, all as uint64/uint32 — the result equals one process's bit for bit. Each
// rank reads only the chunks of its band's frames and places its ops on its own node's backends; the
// merged result lists every rank's placement, positions and time (ProductResult::ranks).
//
// Messages (protocol "4D-STEM products", tags 32..34, distributed/rank_services.h; sent and taken through
// distributed/rank_exchange.h): rank 0 -> r: product request (32); r -> 0: product result (33) or failure (34).
#pragma once

#include "distributed/rank_services.h"
#include "distributed/world.h"
#include "stem/products/products.h"

namespace tmorph {

// Rank 0 of a job with several ranks: compute_products with the scan rows split across the ranks.
// A rank's failure is thrown once every rank answered, naming the rank and its host.
ProductResult compute_products_across_ranks(const Acquisition& acq, const ProductRequest& req, const Planner& planner,
                                            World& world);

// The service ranks > 0 give: each request computes its band with this rank's planner, threads and memory budget
// (kept by reference: `planner` outlives the service) and sends the result or the failure to rank 0.
RankService product_rank_service(const Planner& planner, unsigned threads, uint64_t memory_budget);

}  // namespace tmorph
