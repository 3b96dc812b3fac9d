#include "core/byte_size.h"

#include <climits>

#include "tensormorph/error.h"

namespace tmorph {

uint64_t parse_bytes(const std::string& text, const std::string& what) {
  size_t pos = 0;
  unsigned long long value = 0;
  // std::stoull would take "-5" (as 2^64 - 5) and leading spaces.
  if (text.empty() || text[0] < '0' || text[0] > '9')
    throw Error(ErrorKind::InvalidArgument, what + ": expected a byte count like 1048576 or 512M, got '" + text + "'");
  try {
    value = std::stoull(text, &pos);
  } catch (const std::exception&) {
    throw Error(ErrorKind::InvalidArgument, what + ": expected a byte count like 1048576 or 512M, got '" + text + "'");
  }
  std::string suffix = text.substr(pos);
  int shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (suffix == "T" || suffix == "t") shift = 40;
  else if (!suffix.empty())
    throw Error(ErrorKind::InvalidArgument, what + ": unknown size suffix '" + suffix + "' (use K, M, G or T)");
  if (shift && value > (ULLONG_MAX >> shift))
    throw Error(ErrorKind::InvalidArgument, what + ": '" + text + "' overflows 64 bits");
  return static_cast<uint64_t>(value) << shift;
}

}  // namespace tmorph
