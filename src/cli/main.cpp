#include "cli/commands.h"

int main(int argc, char** argv) { return tmorph::cli::run_app(argc, argv); }
