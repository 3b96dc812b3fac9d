// Placement: what the planner decided for one op, and why. Every result carries one per op.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "tensormorph/dtype.h"
#include "tensormorph/plugin_abi.h"

namespace tmorph {

struct Backend;

// Where current copies of a tensor live: host memory, and the devices that hold one too, each named
// "backend/device id". A device that works on host memory (host link 0) reads the host copy.
struct Residency {
  bool on_host = true;
  std::set<std::string> devices;
};

// What an op needs, independent of who will run it.
struct OpRequest {
  tm_op op = TM_OP_INVALID;
  DType dtype = DType::F32;
  uint64_t elements = 0;
  uint64_t bytes = 0;
  Residency residency;
  // Approximation steps the caller consents to (--allow-approx). Empty: exact only.
  std::set<std::string> allowed_approx_steps;
  uint64_t memory_budget_bytes = 0;  // 0 = unlimited
  // Ops over a stored format, whose kernels' dtype_mask holds formats rather than dtypes: the format
  // id (TM_OP_DEQUANTIZE_GGML, TM_OP_GGML_BLOCK_STATS: the ggml type id; TM_OP_DEQUANTIZE_PACKED: the
  // TM_PACKED_* scheme) and its name, for the report.
  uint32_t format_id = 0;
  std::string format_name;
  // ggml block formats: elements and bytes of one block, so a kernel's self-test can build an input of
  // the format (0: unknown, and such a kernel is not self-tested for it).
  uint32_t format_block_elements = 0;
  uint32_t format_block_bytes = 0;
};

// User constraints: the same planner honours them; nothing is decided outside it.
struct Constraints {
  std::string strict_backend;       // --backend NAME: only NAME, or fail
  std::vector<std::string> prefer;  // --prefer NAME / compute.prefer, in order
  std::set<std::string> never;      // --never NAME / compute.never
};

struct Rejection {
  std::string backend;
  std::string device;
  std::string reason;  // missing_kernel, dtype_unsupported, too_large, over_memory_budget,
                       // missing_feature, needs_consent, disabled_by_policy, not_requested,
                       // costlier, below_open_threshold (a plugin not considered for a small input), unavailable:<code>
  std::string detail;
};

struct Placement {
  std::string op;
  std::string backend;
  std::string device;
  std::string device_kind;
  bool software_adapter = false;
  // resident_data, cheapest, sole_supporter, user_pinned, user_preferred, fallback_missing_kernel
  std::string reason;
  std::string precision;        // "exact", "deterministic", "bounded(tol)"
  std::string approx_step;      // empty unless the caller consented to an approximation
  std::string consent;          // "--allow-approx STEP" when approx_step is set
  double estimated_seconds = 0;
  uint64_t bytes_transferred = 0;
  std::vector<Rejection> rejected;
  bool throughput_calibrated = false;

  // For running it (not reported).
  const Backend* backend_ref = nullptr;
  uint32_t device_index = 0;
  uint32_t kernel_index = 0;
};

// One rung of the fallback ladder: an approximation that could serve a refused exact request.
struct LadderStep {
  std::string step;
  std::string backend;
  std::string precision;
  std::string description;
};

}  // namespace tmorph
