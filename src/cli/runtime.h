// The composition root: settings, the backend registry (CPU + discovered plugins), the cost model and
// the user's constraints, assembled from flags, environment and the settings file.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/planner.h"
#include "tensormorph/settings.h"

namespace tmorph::cli {

// Flags shared by every subcommand that computes.
struct ComputeFlags {
  std::string backend;
  std::vector<std::string> prefer;
  std::vector<std::string> never;
  std::vector<std::string> allow_approx;
  unsigned threads = 0;
  std::string memory_budget;  // bytes, or with a K/M/G/T suffix (powers of 1024)
  void add_to(CLI::App* cmd);
};

struct Runtime {
  Settings settings;
  BackendRegistry registry;
  CostModel costs;
  Constraints constraints;
  unsigned threads = 1;
  uint64_t memory_budget = 0;
  bool memory_budget_set = false;  // by --memory-budget or compute.memory_budget (else: half of RAM)
  std::string plugin_dir;
  std::string plugin_dir_source;  // "TENSORMORPH_PLUGIN_DIR", "compute.plugin_dir" or "default"
  std::string calibration_path;

  Planner planner() const { return Planner(registry, costs, constraints); }
};

// Builds the runtime; flags may be null for subcommands without compute flags.
std::unique_ptr<Runtime> make_runtime(const ComputeFlags* flags);

// Parses "1024", "64K", "512M", "2G", "1T" (powers of 1024). Throws InvalidArgument naming `what`.
uint64_t parse_bytes(const std::string& text, const std::string& what);

// Directory of the running executable (for the default plugin directory).
std::string executable_dir();

}  // namespace tmorph::cli
