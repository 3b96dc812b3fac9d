// The CLI's side of the declared request parameters (core/param_schema.h, stem/runs/request_params.h): each flag a
// command has that its operation declares gets a validator that checks the flag's text with the declaration's
// grammar and range before CLI11 converts it (CLI11 alone takes "0x10", "+1", " 1" and "nan" as numbers). The
// message is the declaration's: "--inner: expected a number from 0 to 1e+06 (detector pixels), got '-1'".
#pragma once

#include <initializer_list>
#include <string_view>

#include <CLI/CLI.hpp>

#include "core/param_schema.h"

namespace tmorph::cli {

// Attaches the validator to every flag of `cmd` that `op` declares for the CLI, except those in `own_syntax`
// (flags whose text the CLI parses in its own richer form, e.g. --detector-bin N or R,C; their values are
// checked after parsing by the operation's check_*_request). A declared flag the command lacks is a bug: Internal.
void validate_declared_flags(CLI::App* cmd, const OperationSchema& op, std::initializer_list<std::string_view> own_syntax = {});

}  // namespace tmorph::cli
