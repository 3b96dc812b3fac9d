#include <cstdio>
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "tensormorph/error.h"

#ifndef TM_VERSION
#define TM_VERSION "dev"
#endif

namespace tmorph::cli {

int run_app(int argc, char** argv) {
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
  add_stem_command(app);
  add_render_commands(app);
  add_serve_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // A usage error: the same prefix and exit code as every other invalid argument (CLI11's own codes,
    // 104..109, mean nothing to a caller).
    std::fprintf(stderr, "tensormorph: error: %s\nRun with --help for more information.\n", e.what());
    return Error(ErrorKind::InvalidArgument, "").exit_code();
  } catch (const Error& e) {
    std::fprintf(stderr, "tensormorph: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::filesystem::filesystem_error& e) {  // e.g. a symbolic-link loop met by a path query
    const std::string path = e.path1().empty() ? std::string("a path") : e.path1().string();
    std::fprintf(stderr, "tensormorph: error: %s: %s\n", path.c_str(), e.code().message().c_str());
    return Error(ErrorKind::Io, "").exit_code();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "tensormorph: error: out of memory\n");
    return 70;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tensormorph: internal error: %s\n", e.what());
    return 70;
  }
  return 0;
}

}  // namespace tmorph::cli
