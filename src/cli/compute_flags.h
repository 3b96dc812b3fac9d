// The compute flags every computing subcommand takes, parsed into the application's compute request.
#pragma once

#include <CLI/CLI.hpp>

#include "app/runtime.h"

namespace tmorph::cli {

using app::Runtime;

// app::make_runtime, then the resident store's budget: --resident-memory (stem commands), stem.resident_memory,
// else 0 (a one-shot command gains nothing from keeping an acquisition).
std::unique_ptr<Runtime> command_runtime(const app::ComputeRequest* flags);

// --backend, --prefer, --never, --allow-approx, --threads, --memory-budget (app::ComputeRequest's fields).
struct ComputeFlags : app::ComputeRequest {
  void add_to(CLI::App* cmd);
};

}  // namespace tmorph::cli
