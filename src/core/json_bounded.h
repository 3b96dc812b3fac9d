// Parsing JSON that came from outside (file headers, index and config files, request bodies) with limits
// that keep every later step bounded: a nesting depth, no NUL byte (nlohmann's lexer would take it for the
// end of the text and ignore what follows), and no key given twice within one object (a JSON object would
// keep one of the two silently). Linear in the text's length: one pass, no callback parser.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace tmorph {

// The deepest nesting any document we read legitimately has is a handful of levels; serde_json (the
// safetensors reference) stops at 128. Every JSON value is at depth >= 1 (the top-level value is 1).
inline constexpr size_t kJsonMaxDepth = 64;

struct JsonLimits {
  size_t max_depth = kJsonMaxDepth;
  // The message for a key given twice in one object at `depth` (1 = the top-level object); empty: the
  // default "key 'K' appears twice in one object".
  std::function<std::string(const std::string& key, size_t depth)> duplicate_key_message;
};

// The document `text` holds. Throws tmorph::Error(BadInput) "WHERE: not valid JSON: ..." for text that is
// not one JSON value, and "WHERE: ..." naming the byte offset (within text) of a NUL byte, or the depth
// limit, or the repeated key.
nlohmann::json parse_json_bounded(std::string_view text, const std::string& where, const JsonLimits& limits = {});

// A short description of `v` for error messages: scalars as JSON (strings cut to `max_chars`), lists of up
// to 8 scalars as JSON, other containers as "an array of N values" / "an object of N keys". Never deeper
// than one level, never long; invalid UTF-8 shows as U+FFFD.
std::string json_brief(const nlohmann::json& v, size_t max_chars = 48);

}  // namespace tmorph
