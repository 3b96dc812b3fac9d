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

// Whether the planner may split one op over several backends (--split / compute.split; docs/backends.md "Split
// placement"): Off never; Auto when other hardware devices would each take a useful share of a large input (a
// software adapter such as lavapipe shares the host's cores, so it is never added); On whenever another admitted
// backend can take a share, software adapters included (what the tests and a what-if use).
enum class SplitMode { Off, Auto, On };

// User constraints: the same planner honours them; nothing is decided outside it.
struct Constraints {
  std::string strict_backend;       // --backend NAME: only NAME, or fail (never split)
  std::vector<std::string> prefer;  // --prefer NAME / compute.prefer, in order
  std::set<std::string> never;      // --never NAME / compute.never
  SplitMode split = SplitMode::Auto;
};

struct Rejection {
  std::string backend;
  std::string device;
  std::string reason;  // missing_kernel, dtype_unsupported, too_large, over_memory_budget,
                       // missing_feature, needs_consent, disabled_by_policy, not_requested,
                       // costlier, below_open_threshold (a plugin not considered for a small input), unavailable:<code>
  std::string detail;
};

struct SplitShare;

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
  // A split op (Constraints::split): every backend's share, the placement above (the cheapest alone) first, and why
  // the planner split ("estimated 0.41 s split vs 0.66 s on cpu alone"). Empty when one backend runs it all.
  std::vector<SplitShare> split;
  std::string split_why;

  // For running it (not reported).
  const Backend* backend_ref = nullptr;
  uint32_t device_index = 0;
  uint32_t kernel_index = 0;
};

// One backend's part of a split op: where it runs (its own placement: backend, device, kernel; estimated_seconds is
// its share's) and the fraction of the op's bytes the planner gave it (by throughput, transfer included); then what
// the run measured. A share that fails hands its work to the next share that has not failed, and says so.
struct SplitShare {
  Placement placement;
  double fraction = 0;
  uint64_t units = 0;     // the op's units it computed (stats.moments: canonical blocks)
  uint64_t bytes = 0;     // input bytes it read
  double seconds = 0;     // wall time of its calls
  std::string failed;     // the error it met, when it failed
  std::string handed_to;  // the backend that took over its work then
};

// One rung of the fallback ladder: an approximation that could serve a refused exact request.
struct LadderStep {
  std::string step;
  std::string backend;
  std::string precision;
  std::string description;
};

}  // namespace tmorph
