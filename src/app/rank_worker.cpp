#include "app/rank_worker.h"

#include "app/indexing.h"
#include "index/distributed_indexer.h"
#include "stem/distribution/distributed_products.h"
#include "stem/distribution/distributed_ssb.h"

namespace tmorph::app {

RankServiceRegistry rank_services(const Planner& planner, const IndexingOptions& indexing, unsigned threads, uint64_t memory_budget) {
  RankServiceRegistry services;
  services.add(indexing_rank_service(planner, indexing));
  services.add(product_rank_service(planner, threads, memory_budget));
  services.add(ssb_band_rank_service(threads, memory_budget));
  return services;
}

int serve_as_worker_rank(const Runtime& rt, World& world) {
  const Planner planner = rt.planner();
  const IndexingOptions indexing = indexing_options(rt, {}, true);
  const RankServiceRegistry services = rank_services(planner, indexing, rt.threads, rt.memory_budget);
  return serve_rank_requests(world, services);
}

}  // namespace tmorph::app
