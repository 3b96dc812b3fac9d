#include "cli/output.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "core/format.h"

namespace tmorph::cli {

bool& explain_placement() {
  static bool explain = false;
  return explain;
}

namespace {

// "cpu (stats.moments, decode x2), vulkan (stem.ssb_overlap: bounded(0.0002))": backends in first-use order,
// each with its ops in order (repeats counted), precision named when not exact.
std::string where_ops_ran(const std::vector<Placement>& ps) {
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, int>>>> by_backend;
  const auto add = [&](const Placement& p, const std::string& note) {
    const std::string backend = p.backend + (p.software_adapter ? " (software adapter)" : "");
    auto b = std::find_if(by_backend.begin(), by_backend.end(), [&](const auto& e) { return e.first == backend; });
    if (b == by_backend.end()) b = by_backend.insert(by_backend.end(), {backend, {}});
    const std::string op = p.op + (p.precision == "exact" || p.precision.empty() ? "" : ": " + p.precision) + note;
    auto o = std::find_if(b->second.begin(), b->second.end(), [&](const auto& e) { return e.first == op; });
    if (o == b->second.end()) b->second.push_back({op, 1});
    else ++o->second;
  };
  for (const auto& p : ps) {
    if (p.split.empty()) {
      add(p, "");
      continue;
    }
    // A split op under each backend that computed part of it: its share of the bytes it read.
    uint64_t bytes = 0;
    for (const auto& sh : p.split) bytes += sh.bytes;
    for (const auto& sh : p.split) {
      if (bytes && !sh.bytes) continue;
      char pct[48];
      std::snprintf(pct, sizeof pct, " %.0f%% of a split", 100.0 * (bytes ? static_cast<double>(sh.bytes) / static_cast<double>(bytes) : sh.fraction));
      add(sh.placement, pct);
    }
  }
  std::string out;
  for (const auto& [backend, ops] : by_backend) {
    out += (out.empty() ? "" : ", ") + backend + " (";
    for (size_t i = 0; i < ops.size(); ++i)
      out += (i ? ", " : "") + ops[i].first + (ops[i].second > 1 ? " x" + std::to_string(ops[i].second) : "");
    out += ")";
  }
  return out;
}

// What did not run where it would have: a preferred backend without the kernel, a backend whose self-test
// failed, an approximation consented to. A backend that is simply absent, or costlier, is not a fallback.
std::vector<std::string> fallbacks(const std::vector<Placement>& ps) {
  std::vector<std::string> out;
  for (const auto& p : ps) {
    bool said = false;
    for (const auto& r : p.rejected)
      if (r.reason == "self_test_failed") {
        out.push_back(p.op + " to " + p.backend + " (" + r.backend + " failed its self-test)");
        said = true;
      }
    if (p.reason == "fallback_missing_kernel" && !said)  // which preferred backend, and why: --explain
      out.push_back(p.op + " to " + p.backend + " (no preferred backend could serve it)");
    if (!p.approx_step.empty()) out.push_back(p.op + " approximated by " + p.approx_step + " (" + p.consent + ")");
    for (const auto& sh : p.split)
      if (!sh.failed.empty()) out.push_back(p.op + " share of " + sh.placement.backend + " to " + sh.handed_to + " (" + sh.placement.backend + " failed)");
  }
  std::vector<std::string> once;  // an op placed several times falls back once in the line
  for (auto& f : out)
    if (std::find(once.begin(), once.end(), f) == once.end()) once.push_back(std::move(f));
  return once;
}

}  // namespace

void print_placements(const std::vector<Placement>& ps) {
  if (!explain_placement()) {
    const std::vector<std::string> fell = fallbacks(ps);
    std::string line = "placement: " + where_ops_ran(ps) + "; ";
    if (fell.empty()) line += "nothing fell back";
    for (size_t i = 0; i < fell.size(); ++i) line += (i ? "; " : "fell back: ") + fell[i];
    std::cout << line << " (--explain: each op's reason and the backends passed over)\n";
    return;
  }
  std::cout << "placement:\n";
  for (const auto& p : ps) {
    std::printf("  %-28s %s/%s (%s%s)  %s, %s, %s moved%s\n", p.op.c_str(), p.backend.c_str(), p.device.c_str(),
                p.device_kind.c_str(), p.software_adapter ? ", software adapter" : "", p.reason.c_str(),
                p.precision.c_str(), format_bytes(static_cast<double>(p.bytes_transferred)).c_str(),
                p.consent.empty() ? "" : ("  consent: " + p.consent).c_str());
    if (!p.split.empty()) std::printf("  %-28s   split: %s\n", "", p.split_why.c_str());
    for (const auto& sh : p.split)
      std::printf("  %-28s   share %s/%s: planned %.0f%%, ran %s in %.3g s (estimated %.3g s)%s\n", "", sh.placement.backend.c_str(),
                  sh.placement.device.c_str(), 100 * sh.fraction, format_bytes(static_cast<double>(sh.bytes)).c_str(), sh.seconds,
                  sh.placement.estimated_seconds,
                  sh.failed.empty() ? "" : ("; failed, handed to " + sh.handed_to + ": " + sh.failed).c_str());
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
