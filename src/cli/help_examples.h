// One example per subcommand at the end of its --help text ("Example:" and a command line that runs on the demo data
// of `tensormorph demo` and `tensormorph stem demo`; docs/cli.md shows each with its output).
#pragma once

#include <CLI/CLI.hpp>

namespace tmorph::cli {

// Sets the footer of every subcommand of `app` (at any depth) that has an example; call after all are added.
void add_help_examples(CLI::App& app);

}  // namespace tmorph::cli
