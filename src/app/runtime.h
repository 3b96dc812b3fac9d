// The composition root, built once for every face (CLI, server, Python): settings, the backend registry
// (the CPU backend + discovered plugins), the cost model and the user's constraints, assembled from a
// face's compute request, the environment and the settings file.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/param_schema.h"
#include "tensormorph/backend_registry.h"
#include "tensormorph/cost_model.h"
#include "tensormorph/planner.h"
#include "tensormorph/settings.h"

namespace tmorph::app {

// What a face asks of compute (the CLI's --backend/--prefer/--never/--allow-approx/--threads/
// --memory-budget, the Python module's keyword arguments). Empty fields leave the settings' values.
struct ComputeRequest {
  std::string backend;                    // strict: every op on this backend or fail
  std::vector<std::string> prefer;        // replaces compute.prefer when not empty
  std::vector<std::string> never;         // added to compute.never
  std::vector<std::string> allow_approx;  // consented approximation steps (read by the ops that need them)
  unsigned threads = 0;                   // 0: compute.threads or all cores
  std::string memory_budget;              // bytes, or with a K/M/G/T suffix (powers of 1024)
  std::string resident_memory;            // the same for stem.resident_memory (0 allowed: off)
  std::string split;                      // auto, on or off (replaces compute.split when not empty)
  // Where plugins are looked for when neither TENSORMORPH_PLUGIN_DIR nor compute.plugin_dir says: empty
  // means plugins/ beside the executable (the CLI); the Python module names its own (python3 is elsewhere).
  std::string default_plugin_dir;
  Face face = Face::Cli;  // how messages spell the fields: --allow-approx (CLI) or allow_approx (Python)
};

struct Runtime {
  Settings settings;
  BackendRegistry registry;
  CostModel costs;
  Constraints constraints;
  unsigned threads = 1;
  uint64_t memory_budget = 0;
  bool memory_budget_set = false;  // by --memory-budget or compute.memory_budget (else: half of RAM)
  // Bytes of 4D-STEM acquisitions kept resident (stem/resident/resident_store.h), when --resident-memory or
  // stem.resident_memory says; each face applies its default (apply_resident_memory).
  std::optional<uint64_t> resident_memory;
  // stem.resident_device_memory: the resident copies' budget on each device (0: as resident_memory).
  uint64_t resident_device_memory = 0;
  std::string plugin_dir;
  std::string plugin_dir_source;  // "TENSORMORPH_PLUGIN_DIR", "compute.plugin_dir" or "default"
  std::string calibration_path;

  Planner planner() const { return Planner(registry, costs, constraints); }
};

// Builds the runtime; request may be null (the settings alone). Throws InvalidArgument naming the flag or
// setting that is wrong.
// Every approximation step a consent may name: the kernels' (BackendRegistry) and the domains' own (the SSB's
// detector binning, stem/runs/ssb_run.h). make_runtime refuses a consent to any other, naming it and listing these.
std::set<std::string> known_approximation_steps(const Runtime& rt);

std::unique_ptr<Runtime> make_runtime(const ComputeRequest* request);

// The backend names a constraint (prefer, never, a strict backend) may use: the project's backends, installed
// here or not (the parity matrix's columns: cpu, vulkan, cuda, hip, metal, webgpu, ...), and every plugin `rt`
// loaded (null: the matrix's alone, for `config set`, which builds no runtime).
std::set<std::string> known_backend_names(const Runtime* rt);
// Throws InvalidArgument "WHAT: unknown backend 'NAME' (known: a, b, ...)" for the first name not in `known`.
void check_backend_names(const std::vector<std::string>& names, const std::set<std::string>& known, const std::string& what);

// Sets the process's resident store budget: rt.resident_memory, else `face_default` bytes, and its budget on each
// device (rt.resident_device_memory). Returns the budget.
uint64_t apply_resident_memory(const Runtime& rt, uint64_t face_default);
// A quarter of physical memory: the server's and Python's default resident budget.
uint64_t quarter_of_ram();

// Directory of the running executable (for the default plugin directory).
std::string executable_dir();

}  // namespace tmorph::app
