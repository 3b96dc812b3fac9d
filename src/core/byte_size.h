// Byte counts as people write them on command lines, in settings and in API fields.
#pragma once

#include <cstdint>
#include <string>

namespace tmorph {

// Parses "1024", "64K", "512M", "2G", "1T" (powers of 1024; the suffix in either case). Throws
// InvalidArgument naming `what` (the flag or setting) on text that is not a count, an unknown suffix,
// or a value that overflows 64 bits.
uint64_t parse_bytes(const std::string& text, const std::string& what);

}  // namespace tmorph
