// Human formatting shared by messages and tables.
#pragma once

#include <cstdio>
#include <string>

namespace tmorph {

// "512 B", "32.0 MiB", "1.5 TiB" (powers of 1024).
inline std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (bytes >= 1024 && u < 5) bytes /= 1024, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

}  // namespace tmorph
