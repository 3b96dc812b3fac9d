// Each subcommand registers itself on the application; its callback does the work.
#pragma once

#include <CLI/CLI.hpp>

namespace tmorph::cli {

void add_stats_command(CLI::App& app);
void add_backends_command(CLI::App& app);
void add_config_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_demo_command(CLI::App& app);
void add_inventory_commands(CLI::App& app);  // info, ls
void add_export_command(CLI::App& app);
void add_index_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_diff_command(CLI::App& app);     // diff: difference pyramids of two checkpoints
void add_stem_command(CLI::App& app);
void add_render_commands(CLI::App& app);  // render, tile  // stem demo, discover, inspect, load, export
void add_serve_command(CLI::App& app);   // serve: the viewer and its JSON API

// Runs the CLI; returns the process exit code. Errors are printed on stderr.
int run_app(int argc, char** argv);

}  // namespace tmorph::cli
