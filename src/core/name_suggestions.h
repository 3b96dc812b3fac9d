#pragma once
// "Did you mean": the known names closest to a name that matched none, for error messages.
#include <string>
#include <string_view>
#include <vector>

namespace tmorph {

// Up to `limit` of `known`, best first: names that extend `wanted` at a '.' or '_' boundary (a tensor name
// given without its ".weight"), then names within a small edit distance (Levenshtein, at most 2 plus one per
// 8 characters of `wanted`), nearer first; ties keep `known`'s order. Empty when nothing is close.
// Cost: O(|known| · |wanted| · |name|) worst case, names longer than 4 × |wanted| + 8 are skipped.
std::vector<std::string> closest_names(std::string_view wanted, const std::vector<std::string>& known, size_t limit = 3);

// "; did you mean 'a' or 'b'?" (with the leading "; "), or "" when there is no suggestion.
std::string did_you_mean(std::string_view wanted, const std::vector<std::string>& known);

}  // namespace tmorph
