// The one parser and checker of declared parameters (param_schema.h).
#include "core/param_schema.h"

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "tensormorph/error.h"

namespace tmorph {

std::string number_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::trunc(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));  // 1000, not 1e+03
  for (int digits = 1; digits < 17; ++digits) {  // the shortest precision that reads back the same
    std::ostringstream shorter;
    shorter.precision(digits);
    shorter << v;
    if (std::strtod(shorter.str().c_str(), nullptr) == v) return shorter.str();
  }
  std::ostringstream full;
  full.precision(17);
  full << v;
  return full.str();
}

namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// The pieces of a comma-separated list; exactly `count` of them, none empty, or nullopt.
bool split_exact(std::string_view text, size_t count, std::vector<std::string_view>& parts) {
  parts.clear();
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string_view part = text.substr(at, comma == std::string_view::npos ? std::string_view::npos : comma - at);
    if (part.empty()) return false;
    parts.push_back(part);
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return parts.size() == count;
}

bool in_range(const ParamSpec& p, double v) {
  return std::isfinite(v) && (p.lo_open ? v > p.lo : v >= p.lo) && v <= p.hi;
}

}  // namespace

std::string_view ParamSpec::name(Face face) const {
  const std::string_view own = face == Face::Cli ? cli : face == Face::Http ? http : python;
  if (!own.empty()) return own;
  return !http.empty() ? http : !python.empty() ? python : cli;
}

const ParamSpec* OperationSchema::find(Face face, std::string_view spelled_name) const {
  for (const ParamSpec& p : params) {
    const std::string_view own = face == Face::Cli ? p.cli : face == Face::Http ? p.http : p.python;
    if (!own.empty() && own == spelled_name) return &p;
  }
  return nullptr;
}

const ParamSpec& OperationSchema::at(std::string_view any) const {
  for (const ParamSpec& p : params)
    if (p.http == any || p.python == any || p.cli == any) return p;
  throw Error(ErrorKind::Internal, std::string(name) + ": no parameter '" + std::string(any) + "' is declared");
}

std::string OperationSchema::names(Face face) const {
  std::string out;
  for (const ParamSpec& p : params) {
    const std::string_view own = face == Face::Cli ? p.cli : face == Face::Http ? p.http : p.python;
    if (!own.empty()) out += (out.empty() ? "" : ", ") + std::string(own);
  }
  return out;
}

void refuse_unknown(const OperationSchema& op, Face face, std::string_view name) {
  const std::string n(name);
  const std::string who = face == Face::Http ? "parameter '" + n + "'" : n;
  throw Error(ErrorKind::InvalidArgument, who + ": not a parameter of " + std::string(op.name) + " (it takes " + op.names(face) + ")");
}

std::string spelled(const ParamSpec& p, Face face) {
  const std::string n(p.name(face));
  return face == Face::Http ? "parameter '" + n + "'" : n;
}

std::string expectation(const ParamSpec& p) {
  const std::string unit = p.unit.empty() ? "" : " (" + std::string(p.unit) + ")";
  const auto range = [&](const char* what) {
    if (std::isinf(p.lo) && std::isinf(p.hi)) return std::string(what) == "a number" ? std::string("a finite number") : std::string(what) + " finite";
    const bool open_top = std::isinf(p.hi);
    if (open_top) return std::string(what) + (p.lo_open ? " > " : " >= ") + number_text(p.lo);
    if (p.lo_open) return std::string(what) + " in (" + number_text(p.lo) + ", " + number_text(p.hi) + "]";
    return std::string(what) + " from " + number_text(p.lo) + " to " + number_text(p.hi);
  };
  switch (p.kind) {
    case ParamKind::Number: return range("a number") + unit;
    case ParamKind::Count: return range("an integer") + unit;
    case ParamKind::Switch: return "0, 1, false or true";
    case ParamKind::Choice: {
      std::string words(p.form), out;
      size_t at = 0;
      while (true) {
        const size_t bar = words.find('|', at);
        const std::string w = words.substr(at, bar == std::string::npos ? std::string::npos : bar - at);
        out += (out.empty() ? "" : bar == std::string::npos ? " or " : ", ") + w;
        if (bar == std::string::npos) break;
        at = bar + 1;
      }
      return out;
    }
    case ParamKind::Counts: return std::string(p.form) + " (" + std::to_string(p.count) + " unsigned integers" + (p.unit.empty() ? "" : ", " + std::string(p.unit)) + ")";
    case ParamKind::Numbers: return std::string(p.form) + " (" + range(std::to_string(p.count).append(" numbers, each").c_str()) + (p.unit.empty() ? "" : ", " + std::string(p.unit)) + ")";
    case ParamKind::Text: return "a non-empty text";
  }
  return "a valid value";
}

std::string expected_got(const ParamSpec& p, std::string_view got) {
  return "expected " + expectation(p) + ", got '" + std::string(got) + "'";
}

void refuse(const ParamSpec& p, Face face, std::string_view got) {
  throw Error(ErrorKind::InvalidArgument, spelled(p, face) + ": " + expected_got(p, got));
}

bool parse_decimal(std::string_view t, double& out) {
  size_t i = 0;
  if (i < t.size() && t[i] == '-') ++i;
  size_t digits = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
  if (i < t.size() && t[i] == '.') {
    ++i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    ++i;
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
    size_t exp = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i, ++exp;
    if (exp == 0) return false;
  }
  if (i != t.size() || t.size() > 64) return false;
  const std::string copy(t);
  out = std::strtod(copy.c_str(), nullptr);
  return std::isfinite(out);
}

double check_number(const ParamSpec& p, Face face, double v) {
  if (!in_range(p, v)) refuse(p, face, number_text(v));
  return v;
}

uint64_t check_count(const ParamSpec& p, Face face, uint64_t v) {
  if (static_cast<double>(v) < p.lo || static_cast<double>(v) > p.hi) refuse(p, face, std::to_string(v));
  return v;
}

double parse_number(const ParamSpec& p, Face face, std::string_view text) {
  double v = 0;
  if (!parse_decimal(text, v) || !in_range(p, v)) refuse(p, face, text);
  return v;
}

uint64_t parse_count(const ParamSpec& p, Face face, std::string_view text) {
  if (!all_digits(text) || text.size() > 15) refuse(p, face, text);
  const uint64_t v = std::strtoull(std::string(text).c_str(), nullptr, 10);
  if (static_cast<double>(v) < p.lo || static_cast<double>(v) > p.hi) refuse(p, face, text);
  return v;
}

bool parse_switch(const ParamSpec& p, Face face, std::string_view text) {
  if (text == "1" || text == "true") return true;
  if (text == "0" || text == "false") return false;
  refuse(p, face, text);
}

std::string parse_choice(const ParamSpec& p, Face face, std::string_view text) {
  std::string_view words = p.form;
  while (true) {
    const size_t bar = words.find('|');
    if (words.substr(0, bar) == text && !text.empty()) return std::string(text);
    if (bar == std::string_view::npos) break;
    words.remove_prefix(bar + 1);
  }
  refuse(p, face, text);
}

std::vector<uint64_t> parse_counts(const ParamSpec& p, Face face, std::string_view text) {
  std::vector<std::string_view> parts;
  if (!split_exact(text, p.count, parts)) refuse(p, face, text);
  std::vector<uint64_t> out;
  for (const auto part : parts) {
    if (!all_digits(part) || part.size() > 15) refuse(p, face, text);
    out.push_back(std::strtoull(std::string(part).c_str(), nullptr, 10));
  }
  return out;
}

std::vector<double> parse_numbers(const ParamSpec& p, Face face, std::string_view text) {
  std::vector<std::string_view> parts;
  if (!split_exact(text, p.count, parts)) refuse(p, face, text);
  std::vector<double> out;
  for (const auto part : parts) {
    double v = 0;
    if (!parse_decimal(part, v) || !in_range(p, v)) refuse(p, face, text);
    out.push_back(v);
  }
  return out;
}

void check_text(const ParamSpec& p, Face face, std::string_view text) {
  switch (p.kind) {
    case ParamKind::Number: parse_number(p, face, text); return;
    case ParamKind::Count: parse_count(p, face, text); return;
    case ParamKind::Switch: parse_switch(p, face, text); return;
    case ParamKind::Choice: parse_choice(p, face, text); return;
    case ParamKind::Counts: parse_counts(p, face, text); return;
    case ParamKind::Numbers: parse_numbers(p, face, text); return;
    case ParamKind::Text:
      if (text.empty()) refuse(p, face, text);
      return;
  }
}

}  // namespace tmorph
