#include "cli/compute_flags.h"

#include "cli/output.h"

namespace tmorph::cli {

void ComputeFlags::add_to(CLI::App* cmd) {
  cmd->add_option("--backend", backend, "strict: run every op on this backend or fail with the reason");
  cmd->add_option("--prefer", prefer, "prefer this backend when it can serve an op (repeatable)");
  cmd->add_option("--never", never, "never use this backend (repeatable)");
  cmd->add_option("--split", split,
                  "auto, on or off: may one op be split over several backends, each computing part, merged exactly "
                  "(default: compute.split or auto: large inputs, hardware devices only)");
  cmd->add_option("--allow-approx", allow_approx,
                  "consent to a named approximation step when no exact kernel can serve (repeatable)");
  cmd->add_option("--threads", threads, "host threads for CPU kernels (default: compute.threads or all cores)")
      ->check(CLI::Range(1u, kMaxThreads));
  cmd->add_flag("--explain", explain_placement(),
                "print every op's placement with its reason and the backends passed over (default: one line)");
  cmd->add_option("--memory-budget", memory_budget,
                  "bytes one op may hold, e.g. 512M (default: compute.memory_budget or half of RAM)");
}

std::unique_ptr<Runtime> command_runtime(const app::ComputeRequest* flags) {
  auto rt = app::make_runtime(flags);
  app::apply_resident_memory(*rt, 0);  // a CLI command keeps acquisitions resident only when asked
  return rt;
}

}  // namespace tmorph::cli
