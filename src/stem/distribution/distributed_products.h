// 4D-STEM products across the ranks of an MPI job (mpirun -np N tensormorph stem bf|…|mean-dp|prepare).
//
// Rank 0 splits the request's output scan rows into one band per rank (whole scan bins, so binning is
// unchanged), sends each rank its band as a request for that scan region, computes its own band, and
// merges: per-position sums (totals, CoM sums, detector images) are concatenated in band order, pattern
// sums added and maxima taken, all as uint64/uint32 — the result equals one process's bit for bit. Each
// rank reads only the chunks of its band's frames and places its ops on its own node's backends; the
// merged result lists every rank's placement, positions and time (ProductResult::ranks).
//
// Messages: rank 0 -> r: product request (tag 32); r -> 0: product result (33) or failure (34).
#pragma once

#include "distributed/world.h"
#include "stem/products/products.h"

namespace tmorph {

// Rank 0 of a job with several ranks: compute_products with the scan rows split across the ranks.
// A rank's failure is thrown once every rank answered, naming the rank and its host.
ProductResult compute_products_across_ranks(const Acquisition& acq, const ProductRequest& req, const Planner& planner,
                                            World& world);

// Whether `tag` is a request of this protocol.
bool is_product_request(int tag);

// Ranks > 0: computes the band that message m (from rank 0) asks for with this rank's planner, threads
// and memory budget, and sends the result or the failure to rank 0.
void serve_product_request(const RankMessage& m, const Planner& planner, unsigned threads, uint64_t memory_budget, World& world);

}  // namespace tmorph
