#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/help_examples.h"
#include "cli/commands.h"
#include "cli/ranks.h"
#include "distributed/world.h"
#include "tensormorph/error.h"

#ifndef TM_VERSION
#define TM_VERSION "dev"
#endif

namespace tmorph::cli {

namespace {

// An error on stderr. In a job of several ranks, every rank parses the same arguments: a usage error is
// printed by rank 0 alone; another rank's own error (failures while serving rank 0 travel to rank 0,
// which names them) is printed with its rank.
__attribute__((format(printf, 2, 3))) void report_error(bool same_on_every_rank, const char* format, ...) {
  const World& world = World::instance();
  if (world.rank() != 0 && same_on_every_rank) return;
  if (world.rank() != 0) std::fprintf(stderr, "[rank %d] ", world.rank());
  std::va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
}

// The command line's words that are not options (the subcommands come first).
std::vector<std::string> command_words(int argc, char** argv) {
  std::vector<std::string> words;
  for (int k = 1; k < argc; ++k)
    if (argv[k][0] != '-') words.push_back(argv[k]);
  return words;
}

int run_command(int argc, char** argv) {
  CLI::App app{"tensormorph: exact statistics and views of tensor data too large to load naively"};
  app.set_version_flag("--version", TM_VERSION);
  app.require_subcommand(1);
  add_stats_command(app);
  add_backends_command(app);
  add_config_command(app);
  add_calibrate_command(app);
  add_demo_command(app);
  add_inventory_commands(app);
  add_export_command(app);
  add_index_command(app);
  add_compare_command(app);
  add_diff_command(app);
  add_stem_command(app);
  add_render_commands(app);
  add_serve_command(app);
  add_help_examples(app);
  try {
    join_ranks(&argc, &argv, command_words(argc, argv));
  } catch (const Error& e) {
    report_error(true, "tensormorph: error: %s\n", e.what());
    return e.exit_code();
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return World::instance().rank() == 0 ? app.exit(e) : 0;  // --help, --version
    // A usage error: the same prefix and exit code as every other invalid argument (CLI11's own codes,
    // 104..109, mean nothing to a caller).
    report_error(true, "tensormorph: error: %s\nRun with --help for more information.\n", e.what());
    return Error(ErrorKind::InvalidArgument, "").exit_code();
  } catch (const Error& e) {
    report_error(false, "tensormorph: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::filesystem::filesystem_error& e) {  // e.g. a symbolic-link loop met by a path query
    const std::string path = e.path1().empty() ? std::string("a path") : e.path1().string();
    report_error(false, "tensormorph: error: %s: %s\n", path.c_str(), e.code().message().c_str());
    return Error(ErrorKind::Io, "").exit_code();
  } catch (const std::bad_alloc&) {
    report_error(false, "tensormorph: error: out of memory\n");
    return 70;
  } catch (const std::exception& e) {
    report_error(false, "tensormorph: internal error: %s\n", e.what());
    return 70;
  }
  return 0;
}

}  // namespace

int run_app(int argc, char** argv) { return leave_ranks(run_command(argc, argv)); }

}  // namespace tmorph::cli
