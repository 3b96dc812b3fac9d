// The planner: among the backends that can run an op, pick the cheapest that the constraints allow.
// It never substitutes silently: a strict request that cannot be served throws Unavailable naming
// every reason; an op only an approximation could serve throws PrecisionRefused with the ladder.
#pragma once

#include <vector>

#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/placement.h"

namespace tmorph {

// Inputs of at least this many bytes are placed among every backend, each plugin opened first; smaller ones
// among the linked backends (the CPU), the plugins rejected as below_open_threshold, unless the constraints name
// them, a calibration measured them on the op, their device holds the data, or only a plugin can serve the op
// (backend_registry.h: what opening costs). The choice depends on the request only, never on what is open.
inline constexpr uint64_t kOpenPluginsAtBytes = uint64_t{4} << 20;

// Under SplitMode::Auto an op is split only over inputs of at least this many bytes: below it one backend's calls
// cost less than the threads and copies of a split.
inline constexpr uint64_t kSplitAtBytes = uint64_t{256} << 20;

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
  bool considers(const Backend& backend, const OpRequest& request, bool preferred) const;
  Placement place_among(const OpRequest& request, bool all) const;

  const BackendRegistry& registry_;
  const CostModel& costs_;
  Constraints constraints_;
};

}  // namespace tmorph
