// The planner: among the backends that can run an op, pick the cheapest that the constraints allow.
// It never substitutes silently: a strict request that cannot be served throws Unavailable naming
// every reason; an op only an approximation could serve throws PrecisionRefused with the ladder.
#pragma once

#include <vector>

#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/placement.h"

namespace tmorph {

class Planner {
 public:
  Planner(const BackendRegistry& registry, const CostModel& costs, Constraints constraints)
      : registry_(registry), costs_(costs), constraints_(std::move(constraints)) {}

  Placement place(const OpRequest& request) const;

  // Approximations that could serve the request (what --allow-approx would accept), in ladder order.
  std::vector<LadderStep> ladder(const OpRequest& request) const;

  const Constraints& constraints() const { return constraints_; }
  // The same registry and costs under other constraints.
  Planner with(Constraints constraints) const { return Planner(registry_, costs_, std::move(constraints)); }

 private:
  double holder_link_bytes_per_s(const OpRequest& request) const;

  const BackendRegistry& registry_;
  const CostModel& costs_;
  Constraints constraints_;
};

}  // namespace tmorph
