// The compute flags every computing subcommand takes, parsed into the application's compute request.
#pragma once

#include <CLI/CLI.hpp>

#include "app/runtime.h"

namespace tmorph::cli {

using app::make_runtime;
using app::Runtime;

// --backend, --prefer, --never, --allow-approx, --threads, --memory-budget (app::ComputeRequest's fields).
struct ComputeFlags : app::ComputeRequest {
  void add_to(CLI::App* cmd);
};

}  // namespace tmorph::cli
