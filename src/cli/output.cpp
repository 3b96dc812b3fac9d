#include "cli/output.h"

#include <cmath>
#include <cstdio>
#include <iostream>

#include "core/format.h"

namespace tmorph::cli {

void print_placements(const std::vector<Placement>& ps) {
  std::cout << "placement:\n";
  for (const auto& p : ps) {
    std::printf("  %-28s %s/%s (%s%s)  %s, %s, %s moved%s\n", p.op.c_str(), p.backend.c_str(), p.device.c_str(),
                p.device_kind.c_str(), p.software_adapter ? ", software adapter" : "", p.reason.c_str(),
                p.precision.c_str(), format_bytes(static_cast<double>(p.bytes_transferred)).c_str(),
                p.consent.empty() ? "" : ("  consent: " + p.consent).c_str());
    for (const auto& r : p.rejected)
      std::printf("  %-28s   rejected %s%s: %s%s\n", "", r.backend.c_str(), r.device.empty() ? "" : ("/" + r.device).c_str(),
                  r.reason.c_str(), r.detail.empty() ? "" : (" (" + r.detail + ")").c_str());
  }
}

std::string json_text(const nlohmann::json& j) { return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace); }

void print_json(const nlohmann::json& j) { std::cout << json_text(j) << "\n"; }

std::string fmt(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string fmt_shape(const std::vector<uint64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return "[" + s + "]";
}

void print_rows(const std::vector<std::pair<std::string, std::string>>& rows, int indent) {
  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  for (const auto& r : rows)
    std::printf("%*s%-*s  %s\n", indent, "", static_cast<int>(width), r.first.c_str(), r.second.c_str());
}

}  // namespace tmorph::cli
