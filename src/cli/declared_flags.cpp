#include "cli/declared_flags.h"

#include <algorithm>
#include <string>

#include "tensormorph/error.h"

namespace tmorph::cli {

void validate_declared_flags(CLI::App* cmd, const OperationSchema& op, std::initializer_list<std::string_view> own_syntax) {
  for (const ParamSpec& p : op.params) {
    if (p.cli.empty() || std::find(own_syntax.begin(), own_syntax.end(), p.cli) != own_syntax.end()) continue;
    CLI::Option* option = cmd->get_option_no_throw(std::string(p.cli));
    if (!option)
      throw Error(ErrorKind::Internal, "stem " + cmd->get_name() + ": " + std::string(op.name) + " declares " + std::string(p.cli) +
                                           ", which the command does not have");
    if (p.kind == ParamKind::Switch) continue;  // a flag without a value: CLI11 refuses one given a value
    const ParamSpec* spec = &p;  // the declarations are static
    option->check(CLI::Validator(
        [spec](std::string& text) -> std::string {
          try {
            check_text(*spec, Face::Cli, text);
          } catch (const Error&) {
            return expected_got(*spec, text);  // CLI11 prefixes the flag: "--inner: expected …"
          }
          return "";
        },
        std::string(expectation(p)), std::string(p.cli)));
  }
}

}  // namespace tmorph::cli
