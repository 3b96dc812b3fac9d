#include "cli/number_lists.h"

#include <cstdlib>

#include "tensormorph/error.h"

namespace tmorph::cli {

// "a,b,…" as exactly n unsigned integers; throws InvalidArgument naming the flag.
std::vector<uint64_t> parse_list(const std::string& text, size_t n, const std::string& flag) {
  std::vector<uint64_t> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    size_t used = 0;
    unsigned long long v = 0;
    try {
      v = std::stoull(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || item[0] == '-')
      throw Error(ErrorKind::InvalidArgument, flag + " " + text + ": expected " + std::to_string(n) + " comma-separated non-negative integers");
    out.push_back(v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.size() != n)
    throw Error(ErrorKind::InvalidArgument, flag + " " + text + ": expected " + std::to_string(n) + " comma-separated non-negative integers");
  return out;
}

std::pair<double, double> parse_limits(const std::string& text, const std::string& flag) {
  return parse_number_pair(text, flag, "LO,HI");
}

std::pair<double, double> parse_number_pair(const std::string& text, const std::string& flag, const std::string& form) {
  const size_t comma = text.find(',');
  char* end = nullptr;
  const std::string lo = text.substr(0, comma), hi = comma == std::string::npos ? "" : text.substr(comma + 1);
  const double a = std::strtod(lo.c_str(), &end);
  const bool lo_ok = !lo.empty() && *end == 0;
  const double b = std::strtod(hi.c_str(), &end);
  if (!lo_ok || hi.empty() || *end != 0)
    throw Error(ErrorKind::InvalidArgument, flag + " " + text + ": expected two numbers " + form);
  return {a, b};
}

}  // namespace tmorph::cli
