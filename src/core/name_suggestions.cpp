#include "core/name_suggestions.h"

#include <algorithm>
#include <numeric>

namespace tmorph {

namespace {

// Levenshtein distance, stopping early (returning bound + 1) once every cell of a row exceeds `bound`.
size_t edit_distance(std::string_view a, std::string_view b, size_t bound) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    size_t row_min = row[0];
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
      row_min = std::min(row_min, row[j]);
    }
    if (row_min > bound) return bound + 1;
  }
  return row[b.size()];
}

bool extends_at_boundary(std::string_view name, std::string_view wanted) {
  return !wanted.empty() && name.size() > wanted.size() && name.substr(0, wanted.size()) == wanted &&
         (name[wanted.size()] == '.' || name[wanted.size()] == '_');
}

}  // namespace

std::vector<std::string> closest_names(std::string_view wanted, const std::vector<std::string>& known, size_t limit) {
  struct Candidate {
    size_t rank;   // 0: extends wanted; 1 + distance otherwise
    size_t order;  // position in known
  };
  const size_t bound = 2 + wanted.size() / 8;
  std::vector<Candidate> found;
  for (size_t i = 0; i < known.size(); ++i) {
    const std::string& name = known[i];
    if (name == wanted) continue;
    if (extends_at_boundary(name, wanted)) {
      found.push_back({0, i});
      continue;
    }
    if (name.size() > 4 * wanted.size() + 8) continue;
    const size_t gap = name.size() > wanted.size() ? name.size() - wanted.size() : wanted.size() - name.size();
    if (gap > bound) continue;
    const size_t d = edit_distance(wanted, name, bound);
    if (d <= bound) found.push_back({1 + d, i});
  }
  std::stable_sort(found.begin(), found.end(), [](const Candidate& x, const Candidate& y) { return x.rank < y.rank; });
  std::vector<std::string> out;
  for (size_t i = 0; i < found.size() && out.size() < limit; ++i) out.push_back(known[found[i].order]);
  return out;
}

std::string did_you_mean(std::string_view wanted, const std::vector<std::string>& known) {
  const std::vector<std::string> names = closest_names(wanted, known);
  if (names.empty()) return "";
  std::string out = "; did you mean ";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += i + 1 == names.size() ? " or " : ", ";
    out += "'" + names[i] + "'";
  }
  return out + "?";
}

}  // namespace tmorph
