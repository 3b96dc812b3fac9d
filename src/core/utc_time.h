// The current time as UTC in ISO 8601 to the second ("2026-12-07T19:40:00Z"), for the times documents and records
// carry (an index row's indexed_at, a resident copy's built_at, an eviction's evicted_at, an adapter report's
// reported_at).
#pragma once

#include <ctime>
#include <string>

namespace tmorph {

inline std::string utc_now_iso8601() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace tmorph
