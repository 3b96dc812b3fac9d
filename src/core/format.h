// Human formatting shared by messages and tables.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

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

// "[4096,11008]": a shape, strides or offsets as messages name them (no spaces).
inline std::string dims_text(const std::vector<uint64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s.push_back(',');
    s.append(std::to_string(v[i]));
  }
  s.push_back(']');
  return s;
}

}  // namespace tmorph
