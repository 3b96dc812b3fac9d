// Text from files that promise UTF-8 and may not keep the promise (GGUF strings, HDF5 strings and names):
// a check, and a repair for text that is only shown (JSON output must be valid UTF-8, or dump() throws).
#pragma once

#include <string>
#include <string_view>

namespace tmorph {

// Whether `bytes` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
bool is_utf8(std::string_view bytes);

// `bytes` with each byte that does not begin a well-formed UTF-8 sequence replaced by U+FFFD, as nlohmann's
// error_handler_t::replace writes it; valid UTF-8 is returned unchanged.
std::string to_utf8(std::string_view bytes);

}  // namespace tmorph
