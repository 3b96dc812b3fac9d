// The one parser of comma-separated numbers on the command line (regions, bins, shapes of scans, pairs of
// limits or coordinates): every error is InvalidArgument naming the flag, the text and the form expected.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tmorph::cli {

// "a,b,…" as exactly n unsigned integers.
std::vector<uint64_t> parse_list(const std::string& text, size_t n, const std::string& flag);

// "A,B" as two numbers (fractions, exponents, inf allowed); `form` names them in the error, e.g. "LO,HI".
std::pair<double, double> parse_number_pair(const std::string& text, const std::string& flag, const std::string& form);

// Display limits "LO,HI".
std::pair<double, double> parse_limits(const std::string& text, const std::string& flag = "--limits");

}  // namespace tmorph::cli
